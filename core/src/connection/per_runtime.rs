//! One server's command connection per runtime that calls it (issue 44).
//!
//! A call awaited by a task of a multi-thread runtime other than polylock's sends its commands
//! on a connection whose driver task runs on that runtime, so the reply wakes the task on one of
//! its own workers instead of crossing over from polylock's threads. The connection opens at the
//! first call from there (that call, and any until it is open, use the client's own
//! connection), at most [`MAX_CALLER_RUNTIMES`] per client.
//!
//! - *Liveness:* a guard task on that runtime holds a receiver; when the runtime shuts down, the
//!   task (and the connection's driver) is dropped, the sender sees it, and the connection is
//!   never used again (a later runtime given the same id opens its own).
//! - *Closing:* [`SingleServer::close`] (the client's close) drops the connections and the
//!   senders, which ends the guard tasks.
//! - *Not used:* from a current-thread runtime (its tasks run only while someone drives it:
//!   between two `block_on`s a driver there would stall), from outside any runtime, and from
//!   tasks polylock runs itself (watchdog, pub/sub, the rest of a call whose caller dropped it):
//!   those use the client's own connection, on polylock's runtime.

use std::sync::{Arc, Mutex, Weak};

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use tokio::runtime::{Handle, Id, RuntimeFlavor};
use tokio::sync::oneshot;

use super::loop_link::{attached_here, Link};
use super::{connect_manager, Timeouts};
use crate::foundation::maps::Map;

/// How many runtimes other than polylock's get a connection of their own, per client. Calls
/// from more runtimes (an actix-style server has one per thread) use the client's connection.
pub(crate) const MAX_CALLER_RUNTIMES: usize = 8;

/// One server's command connections: the client's own (on polylock's runtime) and one per
/// calling runtime.
pub(crate) struct SingleServer {
    own: ConnectionManager,
    own_runtime: Id,
    client: redis::Client,
    timeouts: Timeouts,
    callers: Mutex<Callers>,
    /// The loop links opened to it (`loop_link`), killed when the client closes.
    loop_links: Mutex<Vec<Weak<Link>>>,
}

#[derive(Default)]
struct Callers {
    by_runtime: Map<Id, Caller>,
    closed: bool,
}

struct Caller {
    /// `None` while it opens.
    manager: Option<ConnectionManager>,
    /// Closed once the runtime's guard task is gone (the runtime shut down).
    alive: oneshot::Sender<()>,
}

impl SingleServer {
    pub(crate) fn new(
        own: ConnectionManager,
        client: redis::Client,
        timeouts: Timeouts,
    ) -> SingleServer {
        SingleServer {
            own,
            own_runtime: crate::foundation::runtime::runtime().handle().id(),
            client,
            timeouts,
            callers: Mutex::default(),
            loop_links: Mutex::default(),
        }
    }

    /// The client's own connection (on polylock's runtime).
    pub(crate) fn own(&self) -> &ConnectionManager {
        &self.own
    }

    /// Where a loop link connects to, and its timeouts.
    pub(crate) fn link_target(&self) -> (redis::ConnectionInfo, Timeouts) {
        (self.client.get_connection_info().clone(), self.timeouts)
    }

    /// Keeps `link` to kill it when the client closes (at once if it closed already).
    pub(crate) fn adopt_loop_link(&self, link: &Arc<Link>) {
        let mut links = self.loop_links();
        links.retain(|known| known.strong_count() > 0);
        links.push(Arc::downgrade(link));
        drop(links);
        if self.lock().closed {
            link.close();
        }
    }

    /// Whether the client closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    fn kill_loop_links(&self) {
        let links = std::mem::take(&mut *self.loop_links());
        for link in links.iter().filter_map(Weak::upgrade) {
            link.close();
        }
    }

    fn loop_links(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Link>>> {
        self.loop_links
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sends `cmd` on the connection for a call made now.
    pub(crate) fn req_packed_command<'a>(
        self: &'a Arc<Self>,
        cmd: &'a Cmd,
    ) -> RedisFuture<'a, Value> {
        if let Some(link) = attached_here(self) {
            return link.send_command(cmd);
        }
        let (mut manager, caller) = self.manager();
        Box::pin(async move {
            let reply = manager.req_packed_command(cmd).await;
            self.replied(caller, reply.as_ref().err());
            reply
        })
    }

    /// Sends `pipeline` on the connection for a call made now.
    pub(crate) fn req_packed_commands<'a>(
        self: &'a Arc<Self>,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        if let Some(link) = attached_here(self).filter(|_| !pipeline.is_transaction()) {
            return link.send_pipeline(pipeline, offset, count);
        }
        let (mut manager, caller) = self.manager();
        Box::pin(async move {
            let reply = manager.req_packed_commands(pipeline, offset, count).await;
            self.replied(caller, reply.as_ref().err());
            reply
        })
    }

    /// The connection for a call made now: the caller's runtime's, when it has one open (with
    /// that runtime's id), else the client's own.
    fn manager(self: &Arc<Self>) -> (ConnectionManager, Option<Id>) {
        if let Some(caller) = crate::foundation::runtime::caller_runtime() {
            if caller.runtime_flavor() == RuntimeFlavor::MultiThread
                && caller.id() != self.own_runtime
            {
                if let Some(manager) = self.callers_manager(&caller) {
                    return (manager, Some(caller.id()));
                }
            }
        }
        (self.own.clone(), None)
    }

    /// A runtime's connection that failed for want of a connection (or timed out) is dropped:
    /// the next calls from there use the client's own connection, which polylock's background
    /// work (renewals, retried releases) keeps in use, while a new one opens. (Kept, a
    /// connection that reconnected during an outage would fail the first call after it.)
    fn replied(&self, caller: Option<Id>, err: Option<&redis::RedisError>) {
        let (Some(id), Some(err)) = (caller, err) else {
            return;
        };
        if err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_timeout()
        {
            self.lock().by_runtime.remove(&id);
        }
    }

    fn callers_manager(self: &Arc<Self>, caller: &Handle) -> Option<ConnectionManager> {
        let id = caller.id();
        let mut callers = self.lock();
        if callers.closed {
            return None;
        }
        if let Some(known) = callers.by_runtime.get(&id) {
            if !known.alive.is_closed() {
                return known.manager.clone();
            }
        }
        // Runtimes shut down (this id's too, should a new runtime have it) free their slots.
        callers
            .by_runtime
            .retain(|_, known| !known.alive.is_closed());
        if callers.by_runtime.len() >= MAX_CALLER_RUNTIMES {
            return None;
        }
        let (alive, gone) = oneshot::channel();
        callers.by_runtime.insert(
            id,
            Caller {
                manager: None,
                alive,
            },
        );
        drop(callers);
        // Weak: a guard task must not keep a dropped client's connections alive.
        let server = Arc::downgrade(self);
        caller.spawn(guard(server, id, gone));
        None
    }

    /// Drops the callers' connections and ends their guard tasks; later calls use the client's
    /// own connection.
    pub(crate) fn close(&self) {
        let mut callers = self.lock();
        callers.closed = true;
        callers.by_runtime.clear();
        drop(callers);
        self.kill_loop_links();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Callers> {
        self.callers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Runs on the calling runtime: opens its connection (whose driver task is then spawned there),
/// then lives as long as the runtime and the client's entry do.
async fn guard(server: Weak<SingleServer>, id: Id, gone: oneshot::Receiver<()>) {
    let Some(opening) = server.upgrade() else {
        return;
    };
    let (client, timeouts) = (opening.client.clone(), opening.timeouts);
    drop(opening);
    let opened = connect_manager(&client, "connect", timeouts).await;
    let Some(server) = server.upgrade() else {
        return;
    };
    {
        let mut callers = server.lock();
        match (opened, callers.by_runtime.get_mut(&id)) {
            (Ok(manager), Some(caller)) => caller.manager = Some(manager),
            // Not opened: the entry goes, so that a later call tries again.
            (Err(err), Some(_)) => {
                tracing::debug!("a connection for the calling runtime did not open: {err}");
                callers.by_runtime.remove(&id);
                return;
            }
            // The client closed meanwhile.
            (_, None) => return,
        }
    }
    drop(server);
    // Ends when the client drops the entry (closed) or the runtime drops this task.
    let _ = gone.await;
}
