//! TLS: the process-wide rustls crypto provider, and the options' certificates.

/// Installs rustls's `ring` provider as the process default, once, before any TLS connection:
/// the `redis` crate enables no crypto backend of rustls, so without a default rustls panics on
/// the first handshake. A provider the application installed first is kept.
pub(crate) fn install_crypto_provider() {
    #[cfg(feature = "tls")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // Err: another provider was installed first; it is used.
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
    }
}
