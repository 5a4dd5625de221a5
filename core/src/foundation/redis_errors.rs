//! The reading of `redis` errors that [`crate::Error::from_redis`] classifies by: an ACL
//! refusal and a failed TLS handshake, told in words. Pure functions of the error, at the
//! bottom of the core, so that the error type depends on nothing above it (the ACL check and
//! the TLS setup use them too).

/// What a refused command was refused, when `err` is Redis refusing it to this user: a
/// `NOPERM` reply, or a lock script's call refused (`ERR The user executing the script can't
/// ...`, or `ACL failure in script` on newer servers). The one place where these replies are
/// read: [`ErrorKind::Permission`](crate::ErrorKind::Permission) carries this text.
pub(crate) fn refusal(err: &redis::RedisError) -> Option<String> {
    let text = err.detail().unwrap_or_default().to_owned();
    let in_script = err.code() == Some("ERR")
        && (text.contains("The user executing the script can't")
            || text.contains("ACL failure in script"));
    if err.code() != Some("NOPERM") && !in_script {
        return None;
    }
    // The server's own words, without the script's sha and line that follow them.
    let said = text.split(" script: ").next().unwrap_or_default().trim();
    // The command first: its name may hold "key" (`hkeys`).
    let command = quoted(&text).filter(|_| text.contains(" run "));
    let what = if let Some(command) = command {
        format!("run {}", command.to_uppercase().replace('|', " "))
    } else if text.contains("channel") {
        "use a channel of this call (the lock's channel or one derived from its name)".to_owned()
    } else if text.contains("key") {
        "access a key of this call (the lock's name or a key derived from it)".to_owned()
    } else {
        "run a command the lock script calls".to_owned()
    };
    let place = if in_script { " from a lock script" } else { "" };
    Some(format!(
        "permission denied: the Redis user may not {what}{place} (Redis: {said}); grant it as \
         in docs/deployments.md, \"ACL and managed services\", or list what is missing with \
         `polylock check --permissions`"
    ))
}

/// The first `'quoted'` word of a server message (the command it names).
pub(crate) fn quoted(text: &str) -> Option<&str> {
    let (_, rest) = text.split_once('\'')?;
    let (word, _) = rest.split_once('\'')?;
    Some(word)
}

/// What a failed TLS handshake means, in words, when `err` is one: the server's certificate is
/// not trusted, has expired, or names another host; the server refused the connection without
/// a client certificate; or it does not speak TLS.
pub(crate) fn tls_failure(err: &redis::RedisError) -> Option<&'static str> {
    #[cfg(feature = "tls")]
    {
        use rustls::{AlertDescription as Alert, CertificateError as Cert, Error as Tls};
        let why = match rustls_error(err)? {
            Tls::InvalidCertificate(Cert::Expired | Cert::ExpiredContext { .. }) => {
                "the server's certificate has expired"
            }
            Tls::InvalidCertificate(Cert::NotValidYet | Cert::NotValidYetContext { .. }) => {
                "the server's certificate is not valid yet"
            }
            Tls::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => {
                "the server's certificate is not trusted (it is not signed by a CA in tls_ca, \
                 or by a public root when tls_ca is not given)"
            }
            Tls::InvalidCertificate(
                Cert::NotValidForName | Cert::NotValidForNameContext { .. },
            ) => "the server's certificate is not valid for this host name",
            Tls::InvalidCertificate(_) => "the server's certificate was refused",
            Tls::AlertReceived(
                Alert::CertificateRequired
                | Alert::HandshakeFailure
                | Alert::BadCertificate
                | Alert::UnknownCA
                | Alert::CertificateUnknown
                | Alert::CertificateExpired
                | Alert::AccessDenied,
            ) => {
                "the server refused the client certificate or its absence (give tls_cert and \
                 tls_key, signed by a CA the server trusts)"
            }
            Tls::InvalidMessage(_) => "the server does not speak TLS on this port (redis://?)",
            _ => "the TLS handshake failed",
        };
        Some(why)
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = err;
        None
    }
}

/// The rustls error inside `err`'s chain of sources, if any (a handshake failure reaches
/// the `redis` crate as an I/O error wrapping it).
#[cfg(feature = "tls")]
fn rustls_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut current = Some(err);
    while let Some(err) = current {
        if let Some(found) = err.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        // The `redis` crate keeps its cause as an `Arc`, whose `source` skips the I/O error.
        let err = match err.downcast_ref::<std::sync::Arc<dyn std::error::Error + Send + Sync>>() {
            Some(shared) => &**shared as &(dyn std::error::Error + 'static),
            None => err,
        };
        if let Some(found) = err.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(inner) = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(inner);
        }
        current = err.source();
    }
    None
}
