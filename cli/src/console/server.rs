//! The console's routes: the page and its assets, `GET /api/snapshot`, `GET /api/events`
//! (server-sent events: a `snapshot` event at once and after each refresh), a lock's page
//! (`GET /api/lock?name=`, and its events `GET /api/lock/events?name=`: a `lock` event after
//! each refresh) and `POST /api/force-unlock`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{middleware, Json, Router};
use serde::Deserialize;
use serde_json::json;
use tokio_stream::wrappers::WatchStream;
use tokio_stream::{Stream, StreamExt};

use super::auth::{self, Access};
use super::lock_page::{LockPage, MAX_OPEN_PAGES};
use super::snapshot::{hide_password, Snapshot, TimelineEntry};
use super::Console;
use crate::inspect::{force_unlock, read_named_state, Kind};
use crate::lock_scan::unix_ms;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw;

const INDEX_HTML: &str = include_str!("assets/index.html");
const CONSOLE_CSS: &str = include_str!("assets/console.css");
const CONSOLE_JS: &str = include_str!("assets/console.js");

pub async fn serve(
    listener: tokio::net::TcpListener,
    console: Arc<Console>,
    access: Access,
) -> CliResult<()> {
    let app = Router::new()
        .route("/", get(page))
        .route("/console.css", get(style))
        .route("/console.js", get(script))
        .route("/api/snapshot", get(snapshot))
        .route("/api/events", get(events))
        .route("/api/lock", get(lock_page))
        .route("/api/lock/events", get(lock_events))
        .route("/api/force-unlock", post(force_unlock_route))
        .layer(middleware::from_fn_with_state(
            Arc::new(access),
            auth::check,
        ))
        .with_state(console);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .map_err(|err| CliError::Failed(format!("the console's server stopped: {err}")))
}

async fn page() -> Html<&'static str> {
    Html(INDEX_HTML)
}

async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        CONSOLE_CSS,
    )
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        CONSOLE_JS,
    )
}

async fn snapshot(State(console): State<Arc<Console>>) -> Json<Snapshot> {
    let snapshot = console.readings.fresh().await;
    Json(Snapshot::clone(&snapshot))
}

async fn events(
    State(console): State<Arc<Console>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let snapshots = WatchStream::new(console.readings.subscribe()).map(|snapshot| {
        // A snapshot always encodes (strings, numbers, maps with string keys).
        let data = serde_json::to_string(&*snapshot).unwrap_or_default();
        Ok(Event::default().event("snapshot").data(data))
    });
    Sse::new(snapshots).keep_alive(KeepAlive::default())
}

#[derive(Deserialize)]
struct NameQuery {
    /// The lock name, as the clients name it.
    name: String,
}

/// 400 for a name no lock can have.
fn refuse_bad_name(name: &str) -> Option<Response> {
    let problem = if name.is_empty() {
        "the name must not be empty".to_owned()
    } else if name.len() > polylock::MAX_NAME_BYTES {
        format!(
            "the name is {} bytes long; a lock name has at most {}",
            name.len(),
            polylock::MAX_NAME_BYTES
        )
    } else {
        return None;
    };
    Some(answer(StatusCode::BAD_REQUEST, problem))
}

fn too_many_pages() -> Response {
    answer(
        StatusCode::TOO_MANY_REQUESTS,
        format!("{MAX_OPEN_PAGES} lock pages are open already: close one"),
    )
}

/// A page as JSON, with the refresh's error (Redis not answering: the page is of the last
/// reading that worked).
fn page_json(page: &LockPage, redis_error: Option<&str>) -> serde_json::Value {
    let mut value = serde_json::to_value(page).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("redis_error".into(), json!(redis_error));
    }
    value
}

/// `GET /api/lock?name=`: the lock's page as a refresh after this request read it.
async fn lock_page(
    State(console): State<Arc<Console>>,
    Query(query): Query<NameQuery>,
) -> Response {
    if let Some(refusal) = refuse_bad_name(&query.name) {
        return refusal;
    }
    match console.readings.lock_page(&query.name).await {
        Ok(Some(page)) => {
            let error = console.readings.fresh().await.error.clone();
            Json(page_json(&page, error.as_deref())).into_response()
        }
        Ok(None) => answer(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "'{}' could not be read yet: Redis did not answer",
                query.name
            ),
        ),
        Err(_) => too_many_pages(),
    }
}

/// `GET /api/lock/events?name=`: a `lock` event (the page's JSON) after each refresh, which
/// reads the name while the stream is open.
async fn lock_events(
    State(console): State<Arc<Console>>,
    Query(query): Query<NameQuery>,
) -> Response {
    if let Some(refusal) = refuse_bad_name(&query.name) {
        return refusal;
    }
    let Ok(viewer) = console.readings.pages.view(&query.name) else {
        return too_many_pages();
    };
    let pages = console.readings.pages.clone();
    let name = query.name;
    let pages_events = WatchStream::new(console.readings.subscribe()).filter_map(move |snapshot| {
        let _read_while_open = &viewer;
        let page = pages.page(&name)?;
        let data = page_json(&page, snapshot.error.as_deref()).to_string();
        Some(Ok::<_, Infallible>(
            Event::default().event("lock").data(data),
        ))
    });
    Sse::new(pages_events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[derive(Deserialize)]
struct ForceUnlockRequest {
    /// The lock name.
    name: String,
    /// The owner string of the holder the operator saw: the lock is force-unlocked only if it
    /// still holds it.
    holder: String,
}

/// An answer with a JSON body `{"ok": .., "message": ..}`.
fn answer(status: StatusCode, message: String) -> Response {
    let body = json!({ "ok": status.is_success(), "message": message });
    (status, Json(body)).into_response()
}

/// Force-unlocks `name` (its kind's force-unlock, which wakes the next waiter) if `holder`
/// still holds it. The check and the deletion are two commands: a release and a new
/// acquisition in the milliseconds between them would be force-unlocked too.
async fn force_unlock_route(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Json(request): Json<ForceUnlockRequest>,
) -> Response {
    if !console.allow_write {
        return answer(
            StatusCode::FORBIDDEN,
            "this console is read-only: start it with --allow-write to force-unlock".into(),
        );
    }
    let outcome = async {
        let client = raw::client(&console.redis, console.key_prefix.as_deref()).await?;
        let outcome = checked_force_unlock(&client, &request, peer).await;
        client.shutdown().await;
        outcome
    }
    .await;
    match outcome {
        Ok(Ok(entry)) => {
            eprintln!(
                "polylock console: {}: {}",
                httpdate::fmt_http_date(std::time::SystemTime::now()),
                entry.text
            );
            let message = entry.text.clone();
            console.readings.record(entry);
            answer(StatusCode::OK, message)
        }
        Ok(Err(refused)) => answer(StatusCode::CONFLICT, refused),
        Err(err) => answer(
            StatusCode::SERVICE_UNAVAILABLE,
            hide_password(&err.to_string(), &console.redis),
        ),
    }
}

/// The timeline entry of the force-unlock, or why it was not done (the lock is not held by
/// that holder, or is no lock).
async fn checked_force_unlock(
    client: &polylock::Client,
    request: &ForceUnlockRequest,
    peer: SocketAddr,
) -> CliResult<Result<TimelineEntry, String>> {
    let name = &request.name;
    let state = read_named_state(client, name).await?;
    if !state.kind.is_lock() {
        let what = match state.kind {
            Kind::None => "not held by anyone".to_owned(),
            kind => format!("a {}, which has no holders", kind.label()),
        };
        return Ok(Err(format!("'{name}' is {what}; nothing done")));
    }
    let Some(holder) = state
        .holders
        .iter()
        .find(|holder| holder.owner == request.holder)
    else {
        let now: Vec<&str> = state
            .holders
            .iter()
            .map(|holder| {
                holder
                    .client
                    .client_name
                    .as_deref()
                    .unwrap_or(&holder.owner)
            })
            .collect();
        let now = if now.is_empty() {
            "nobody holds it now".to_owned()
        } else {
            format!("it is held by {} now", now.join(", "))
        };
        return Ok(Err(format!(
            "'{name}' is no longer held by {}: {now}; nothing done",
            request.holder
        )));
    };
    let who = holder.client.text.as_deref().unwrap_or(&holder.owner);
    let text = format!(
        "{peer} force-unlocked {} lock '{name}' held by {who} (owner {})",
        state.kind.label(),
        holder.owner
    );
    if !force_unlock(client, &state).await? {
        return Ok(Err(format!(
            "'{name}' was released meanwhile; nothing done"
        )));
    }
    Ok(Ok(TimelineEntry {
        unix_ms: unix_ms(),
        kind: "force-unlock",
        lock: Some(name.clone()),
        text,
    }))
}
