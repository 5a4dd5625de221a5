//! TLS: the process-wide rustls crypto provider, the options' certificates (a CA bundle, a
//! client certificate and key) read and checked once, applied to every connection a client
//! makes (one server, every cluster node, the sentinels and the primary they name), and the
//! handshake failures told apart.

use redis::{ConnectionAddr, ConnectionInfo};

use crate::foundation::error::{Error, Result};
use crate::foundation::redis_errors::tls_failure;
use crate::settings::options::{ClientOptions, CERT_WITHOUT_KEY, KEY_WITHOUT_CERT};

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

/// The TLS settings of a client, checked: what every `rediss://` connection it opens uses.
#[derive(Clone, Default)]
pub(crate) struct Tls {
    #[cfg(feature = "tls")]
    certs: Option<redis::TlsCertificates>,
    insecure: bool,
}

fn invalid(message: String) -> Error {
    Error::invalid_argument(message)
}

/// PEM text given inline (it starts with `-----BEGIN`) or read from the file it names.
#[cfg(feature = "tls")]
fn pem_source(option: &str, value: &str) -> Result<(String, Vec<u8>)> {
    if value.trim_start().starts_with("-----BEGIN") {
        return Ok((format!("{option} (PEM text)"), value.as_bytes().to_vec()));
    }
    let shown = format!("{option} file '{value}'");
    match std::fs::read(value) {
        Ok(bytes) => Ok((shown, bytes)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(invalid(format!(
            "{shown} was not found (give a PEM file path or PEM text)"
        ))),
        Err(err) => Err(invalid(format!("{shown} cannot be read: {err}"))),
    }
}

/// The certificates of a PEM text: at least one, all well formed.
#[cfg(feature = "tls")]
fn certificates(
    shown: &str,
    pem: &[u8],
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    use rustls::pki_types::pem::PemObject;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|err| invalid(format!("{shown} is not valid PEM: {err}")))?;
    if certs.is_empty() {
        return Err(invalid(format!(
            "{shown} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(certs)
}

impl Tls {
    /// Reads and checks the TLS options (before any I/O on the network): a missing file, a
    /// file without PEM certificates or key, a certificate without key are
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)s saying which.
    pub(crate) fn from_options(options: &ClientOptions) -> Result<Tls> {
        if options.tls_insecure {
            tracing::warn!(
                "tls_insecure: the Redis server's certificate is NOT verified; \
                 anyone on the network path can impersonate it. For development only."
            );
        }
        #[cfg(not(feature = "tls"))]
        {
            if options.tls_ca.is_some() || options.tls_cert.is_some() || options.tls_insecure {
                return Err(invalid(
                    "TLS options need polylock's \"tls\" feature, which this build left out".into(),
                ));
            }
            Ok(Tls {
                insecure: options.tls_insecure,
            })
        }
        #[cfg(feature = "tls")]
        {
            use rustls::pki_types::pem::PemObject;
            let root_cert = match &options.tls_ca {
                None => None,
                Some(ca) => {
                    let (shown, pem) = pem_source("tls_ca", ca)?;
                    let mut store = rustls::RootCertStore::empty();
                    for cert in certificates(&shown, &pem)? {
                        store.add(cert).map_err(|err| {
                            invalid(format!(
                                "{shown} holds a certificate that is not usable as a CA: {err}"
                            ))
                        })?;
                    }
                    Some(pem)
                }
            };
            let client_tls = match (&options.tls_cert, &options.tls_key) {
                (None, None) => None,
                (Some(cert), Some(key)) => {
                    let (shown_cert, cert_pem) = pem_source("tls_cert", cert)?;
                    certificates(&shown_cert, &cert_pem)?;
                    let (shown_key, key_pem) = pem_source("tls_key", key)?;
                    rustls::pki_types::PrivateKeyDer::from_pem_slice(&key_pem).map_err(|err| {
                        invalid(format!(
                            "{shown_key} holds no usable PEM private key \
                             (-----BEGIN PRIVATE KEY----- or an RSA/EC key): {err}"
                        ))
                    })?;
                    Some(redis::ClientTlsConfig {
                        client_cert: cert_pem,
                        client_key: key_pem,
                    })
                }
                // Caught by `ClientOptions::validate`; kept for a direct caller.
                (Some(_), None) => return Err(invalid(CERT_WITHOUT_KEY.into())),
                (None, Some(_)) => return Err(invalid(KEY_WITHOUT_CERT.into())),
            };
            let certs =
                (root_cert.is_some() || client_tls.is_some()).then_some(redis::TlsCertificates {
                    client_tls,
                    root_cert,
                });
            Ok(Tls {
                certs,
                insecure: options.tls_insecure,
            })
        }
    }

    /// Whether any TLS option was given.
    pub(crate) fn is_set(&self) -> bool {
        #[cfg(feature = "tls")]
        if self.certs.is_some() {
            return true;
        }
        self.insecure
    }

    /// `info` with these settings when it is a TLS address (`rediss://`); unchanged otherwise.
    pub(crate) fn apply(&self, info: ConnectionInfo) -> Result<ConnectionInfo> {
        let ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            tls_params,
        } = info.addr().clone()
        else {
            return Ok(info);
        };
        let info = info.set_addr(ConnectionAddr::TcpTls {
            host,
            port,
            insecure: insecure || self.insecure,
            tls_params,
        });
        #[cfg(feature = "tls")]
        if let Some(certs) = &self.certs {
            // The only public way to set a connection's certificates: build a client with them.
            let client = redis::Client::build_with_tls(info, certs.clone())
                .map_err(|err| invalid(format!("TLS certificates: {err}")))?;
            return Ok(client.get_connection_info().clone());
        }
        Ok(info)
    }

    /// A cluster client builder with these settings (for the nodes it discovers).
    pub(crate) fn cluster(
        &self,
        builder: redis::cluster::ClusterClientBuilder,
    ) -> redis::cluster::ClusterClientBuilder {
        #[cfg(feature = "tls")]
        let builder = match &self.certs {
            Some(certs) => builder.certs(certs.clone()),
            None => builder,
        };
        #[cfg(feature = "tls")]
        if self.insecure {
            return builder.tls(redis::TlsMode::Insecure);
        }
        builder
    }

    /// The CA and client certificate given, if any.
    #[cfg(feature = "tls")]
    pub(crate) fn certs(&self) -> Option<redis::TlsCertificates> {
        self.certs.clone()
    }
}

/// Why a TLS handshake with the first of `nodes` fails, in words (see [`tls_failure`]), if it does:
/// for a client (the cluster's) that reports a failed handshake only as text.
pub(crate) async fn diagnose(
    nodes: &[ConnectionInfo],
    timeout: std::time::Duration,
) -> Option<&'static str> {
    let node = nodes.first()?;
    if !matches!(node.addr(), ConnectionAddr::TcpTls { .. }) {
        return None;
    }
    let client = redis::Client::open(node.clone()).ok()?;
    match tokio::time::timeout(timeout, client.get_multiplexed_async_connection()).await {
        Ok(Err(err)) => tls_failure(&err),
        _ => None,
    }
}
