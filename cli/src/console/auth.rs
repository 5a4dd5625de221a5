//! Who may ask the console anything. With a token, every request needs it (the header, or for
//! a GET the `token` query parameter, since a page's address and `EventSource` cannot carry a
//! header); a missing or wrong one gets 401 and a body that says nothing about the locks.
//! Without one (a loopback bind), only requests addressed to a loopback name are answered, so
//! that a web page whose name an attacker re-points at 127.0.0.1 (DNS rebinding) reads nothing.
//! No CORS headers are ever sent: other origins' scripts cannot read the answers.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use subtle::ConstantTimeEq;

/// The page's style and script: the same in every copy of the binary and nothing about the
/// locks, so a browser may load them without the token (the page itself needs it).
const PUBLIC_PATHS: &[&str] = &["/console.css", "/console.js"];

pub struct Access {
    token: Option<String>,
    /// The `Host` values a request without a token may carry.
    loopback_hosts: Vec<String>,
}

#[derive(Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

impl Access {
    pub fn new(token: Option<String>, address: SocketAddr) -> Access {
        let port = address.port();
        Access {
            token,
            loopback_hosts: vec![
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
                address.to_string(),
            ],
        }
    }

    /// The answer for a request that may not pass, or `None`.
    fn refusal(&self, request: &Request) -> Option<Response> {
        let Some(token) = &self.token else {
            let host = request
                .headers()
                .get(header::HOST)
                .and_then(|host| host.to_str().ok())
                .unwrap_or_default();
            if self.loopback_hosts.iter().any(|allowed| allowed == host) {
                return None;
            }
            let text = format!(
                "this console answers requests addressed to {} only\n",
                self.loopback_hosts[0]
            );
            return Some((StatusCode::FORBIDDEN, text).into_response());
        };
        if PUBLIC_PATHS.contains(&request.uri().path()) {
            return None;
        }
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        // Actions (POST) take it in the header only: a URL ends up in logs and histories.
        let in_query = (request.method() == Method::GET)
            .then(|| Query::<TokenQuery>::try_from_uri(request.uri()).ok())
            .flatten()
            .and_then(|query| query.0.token);
        let matches = |given: &str| bool::from(given.as_bytes().ct_eq(token.as_bytes()));
        if bearer.is_some_and(matches) || in_query.as_deref().is_some_and(matches) {
            return None;
        }
        let mut response = (
            StatusCode::UNAUTHORIZED,
            "401: this console needs its token: the header `Authorization: Bearer TOKEN`, or \
             ?token=TOKEN in the page's address\n",
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        Some(response)
    }
}

/// The middleware: refuses or passes each request, and adds the headers every answer carries.
pub async fn check(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    let mut response = match access.refusal(&request) {
        Some(refusal) => refusal,
        None => next.run(request).await,
    };
    protect(response.headers_mut());
    response
}

/// Nothing cached (snapshots are live and may be private), no sniffing, no framing, no
/// referrer (the page's address may carry the token), and only this origin's scripts.
fn protect(headers: &mut HeaderMap) {
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}
