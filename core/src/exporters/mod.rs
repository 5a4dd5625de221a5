//! Exporters: a client's metrics fed to a monitoring system, each behind its feature.

#[cfg(feature = "opentelemetry")]
pub mod otel;
