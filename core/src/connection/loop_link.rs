//! A single server's command connection whose socket belongs to a foreign event loop's thread
//! (Node's libuv loop, Python's asyncio loop; issue 44): a call polled on that thread writes its
//! command there and its reply is read there, with no thread hop between the loop and
//! polylock's runtime.
//!
//! A binding opens a link for a client (`Client::loop_link`, on polylock's runtime), then, on
//! the loop's thread, attaches it ([`LoopLink::attach_here`]), watches [`LoopLink::fd`] and
//! calls [`LoopLink::on_readable`] / [`LoopLink::on_writable`], and polls the engine's futures
//! there (`loop_tasks`). A blocking wait on that thread runs in [`LoopLink::bypassed_here`]. While a link is attached to a thread, `SingleServer` sends the commands of calls
//! polled on that thread through it; polylock's own tasks (watchdog, pub/sub, retried releases)
//! and other threads use the client's connection as before. The engine's order of steps does
//! not change: only the socket a command goes out on does.
//!
//! - *Failure:* a link whose socket fails (a reset, a close, a reply it cannot parse) is dead:
//!   its waiting calls fail as a broken connection does (the engine retries those it retries),
//!   and later calls use the client's own connection until the binding attaches a new link
//!   (`LoopLink::reopen_later`: first after 0.1 s, then backing off to 5 s while it fails).
//! - *Timeouts:* each call waits for its reply at most the client's response timeout (a timer
//!   on polylock's runtime); a reply that comes later is read and dropped, in order.
//! - *Closing:* the client's close (and dropping it) kills its links.
//! - *Not opened* for a cluster, Sentinel, TLS or a unix socket, nor with RESP3: those clients
//!   use their connection as before.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::BytesMut;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use tokio_util::codec::Decoder;

use super::per_runtime::SingleServer;

thread_local! {
    /// The links attached to this thread.
    static ATTACHED: RefCell<Vec<Arc<Link>>> = const { RefCell::new(Vec::new()) };
    /// Set while this thread's links are bypassed (`LoopLink::bypassed_here`).
    static BYPASSED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `work` with this thread's `flag` set, and puts it back as it was after, even when
/// `work` panics (a flag left set would route or queue this thread's later calls wrongly).
pub(super) fn with_flag_set<R>(
    flag: &'static std::thread::LocalKey<Cell<bool>>,
    work: impl FnOnce() -> R,
) -> R {
    struct Restore(&'static std::thread::LocalKey<Cell<bool>>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = self.0.try_with(|flag| flag.set(self.1));
        }
    }
    let _restore = Restore(flag, flag.with(|flag| flag.replace(true)));
    work()
}

/// The live link of `server` attached to this thread, if any.
pub(crate) fn attached_here(server: &Arc<SingleServer>) -> Option<Arc<Link>> {
    if BYPASSED.with(Cell::get) {
        return None;
    }
    ATTACHED.with(|attached| {
        let attached = attached.try_borrow().ok()?;
        attached
            .iter()
            .find(|link| Weak::as_ptr(&link.server) == Arc::as_ptr(server) && !link.is_dead())
            .cloned()
    })
}

/// A link as a binding holds it: dropping it kills the link.
pub struct LoopLink(Arc<Link>);

impl LoopLink {
    /// Opens a link to `connection`'s server (see `Client::loop_link`).
    pub(crate) async fn connect(connection: &super::Connection) -> Option<LoopLink> {
        Self::open(&connection.single_server()?).await
    }

    /// After this link died (the loop saw [`LoopLink::on_readable`] or
    /// [`LoopLink::on_writable`] return false): opens a new one to its server on polylock's
    /// runtime, first after 0.1 s, then again after each failure with the pause doubled up to
    /// 5 s, for as long as the client lives and is not closed; `deliver` gets it, on the
    /// runtime. The binding attaches it on its loop's thread. A link that died in a forked
    /// child is not reopened.
    pub fn reopen_later(&self, deliver: impl FnOnce(LoopLink) + Send + 'static) {
        if self.0.generation != crate::foundation::ids::generation() {
            return;
        }
        let server = Weak::clone(&self.0.server);
        crate::foundation::runtime::runtime().spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                tokio::time::sleep(pause).await;
                let Some(server) = server.upgrade().filter(|server| !server.is_closed()) else {
                    return;
                };
                if let Some(link) = Self::open(&server).await {
                    deliver(link);
                    return;
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        });
    }

    async fn open(server: &Arc<SingleServer>) -> Option<LoopLink> {
        let (info, timeouts) = server.link_target();
        let redis::ConnectionAddr::Tcp(host, port) = info.addr().clone() else {
            return None;
        };
        let settings = info.redis_settings();
        if settings.protocol() != redis::ProtocolVersion::RESP2 {
            return None;
        }
        let mut handshake = Vec::new();
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(username) = settings.username() {
                auth.arg(username);
            }
            auth.arg(password);
            handshake.push(auth);
        }
        if settings.db() != 0 {
            handshake.push(redis::cmd("SELECT").arg(settings.db()).clone());
        }
        let opened = tokio::time::timeout(timeouts.connect, async {
            let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            stream.set_nodelay(true)?;
            if !handshake.is_empty() {
                let mut pipeline = redis::pipe();
                for command in &handshake {
                    pipeline.add_command(command.clone());
                }
                let packed = pipeline.get_packed_pipeline();
                let mut sent = 0;
                while sent < packed.len() {
                    stream.writable().await?;
                    match stream.try_write(&packed[sent..]) {
                        Ok(written) => sent += written,
                        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(err) => return Err(err),
                    }
                }
                let mut read = BytesMut::new();
                let mut codec = redis::ValueCodec::default();
                let mut answered = 0;
                while answered < handshake.len() {
                    match codec.decode(&mut read).map_err(std::io::Error::other)? {
                        Some(Value::ServerError(err)) => {
                            return Err(std::io::Error::other(format!("{err:?}")));
                        }
                        Some(_) => answered += 1,
                        None => {
                            stream.readable().await?;
                            let mut chunk = [0u8; 1024];
                            match stream.try_read(&mut chunk) {
                                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                                Ok(got) => read.extend_from_slice(&chunk[..got]),
                                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                                Err(err) => return Err(err),
                            }
                        }
                    }
                }
            }
            stream.into_std()
        })
        .await;
        let stream = match opened {
            Ok(Ok(stream)) => stream,
            Ok(Err(err)) => {
                tracing::debug!("no loop link (the client's connection is used): {err}");
                return None;
            }
            Err(_) => return None,
        };
        let link = Arc::new(Link {
            server: Arc::downgrade(server),
            generation: crate::foundation::ids::generation(),
            stream,
            response_timeout: timeouts.response,
            state: Mutex::new(State::default()),
        });
        server.adopt_loop_link(&link);
        Some(LoopLink(link))
    }

    /// Attaches the link to this thread: calls polled here send their commands through it.
    pub fn attach_here(&self) {
        ATTACHED.with(|attached| {
            let mut attached = attached.borrow_mut();
            attached.retain(|link| !link.is_dead());
            attached.push(Arc::clone(&self.0));
        });
    }

    /// Runs `work` with this thread's links bypassed: the calls it polls take the client's
    /// connection. For a blocking wait on the loop's thread, during which nothing reads the
    /// links.
    pub fn bypassed_here<R>(work: impl FnOnce() -> R) -> R {
        with_flag_set(&BYPASSED, work)
    }

    /// The socket, for the loop to watch.
    pub fn fd(&self) -> i32 {
        self.0.stream.as_raw_fd()
    }

    /// Reads what arrived and settles the calls it answers (their wakers run now, on this
    /// thread). False once the link is dead: the loop stops watching it, then drops it.
    pub fn on_readable(&self) -> bool {
        self.0.on_readable()
    }

    /// Writes what the socket could not take before. False once the link is dead.
    pub fn on_writable(&self) -> bool {
        self.0.flush();
        !self.0.is_dead()
    }

    /// From now on a call's command is written at once only when no other call waits for a
    /// reply on the link; otherwise it is kept until half as many commands as wait for replies
    /// are kept (at most 32), or the loop calls [`LoopLink::on_writable`]. Concurrent calls'
    /// commands then go out a few in one write, which the server reads at once, as the
    /// multiplexed connection pipelines them. After a pass that leaves
    /// [`LoopLink::wants_writable`] true the loop must call `on_writable` soon: at the end of
    /// its turn (Python) or when the socket reports writable (Node).
    pub fn defer_writes(&self) {
        self.0.lock().deferred = true;
    }

    /// Whether the link holds bytes the socket did not take yet, or, with
    /// [`LoopLink::defer_writes`], bytes not written yet (the loop then flushes, or watches
    /// for writability).
    pub fn wants_writable(&self) -> bool {
        !self.0.lock().unsent.is_empty()
    }
}

impl Drop for LoopLink {
    fn drop(&mut self) {
        self.0.kill(None);
        // Not at all while the thread's locals are torn down (a worker thread ending).
        let _ = ATTACHED.try_with(|attached| {
            if let Ok(mut attached) = attached.try_borrow_mut() {
                attached.retain(|link| !Arc::ptr_eq(link, &self.0));
            }
        });
    }
}

pub(crate) struct Link {
    server: Weak<SingleServer>,
    /// The fork generation it was opened in: a forked child shares the socket with its parent.
    generation: u64,
    stream: TcpStream,
    response_timeout: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The calls waiting for replies, in the order they were sent.
    in_flight: VecDeque<Arc<Slot>>,
    /// Bytes the socket did not take yet.
    unsent: BytesMut,
    read: BytesMut,
    codec: redis::ValueCodec,
    dead: bool,
    /// Commands wait in `unsent` until the loop flushes (`LoopLink::defer_writes`).
    deferred: bool,
    /// Commands waiting in `unsent` since the last write.
    waiting: usize,
}

/// One call's replies: `skip` to read past first, then `want`.
struct Slot(Mutex<SlotState>);

struct SlotState {
    skip: usize,
    want: usize,
    values: Vec<Value>,
    outcome: Option<RedisResult<Vec<Value>>>,
    waker: Option<Waker>,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Link {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// Sends one command; its reply as the multiplexed connection gives it (a server error as
    /// a value).
    pub(crate) fn send_command(self: Arc<Self>, cmd: &Cmd) -> RedisFuture<'static, Value> {
        let reply = self.send(&cmd.get_packed_command(), 0, 1);
        Box::pin(async move {
            let mut values = reply.await?;
            Ok(values.pop().unwrap_or(Value::Nil))
        })
    }

    /// Sends a pipeline (not a transaction: `SingleServer` sends those on the client's
    /// connection); `count` replies after the first `offset`.
    pub(crate) fn send_pipeline(
        self: Arc<Self>,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'static, Vec<Value>> {
        Box::pin(self.send(&pipeline.get_packed_pipeline(), offset, count))
    }

    fn send(
        self: Arc<Self>,
        bytes: &[u8],
        skip: usize,
        want: usize,
    ) -> impl Future<Output = RedisResult<Vec<Value>>> + Send + 'static {
        let slot = Arc::new(Slot(Mutex::new(SlotState {
            skip,
            want,
            values: Vec::with_capacity(want),
            outcome: None,
            waker: None,
        })));
        let failed = {
            let mut state = self.lock();
            if state.dead {
                Some(broken("the loop link is closed"))
            } else {
                let idle = state.in_flight.is_empty();
                state.in_flight.push_back(Arc::clone(&slot));
                state.unsent.extend_from_slice(bytes);
                state.waiting += 1;
                if state.deferred && !idle && state.waiting < deferred_at_most(&state) {
                    None
                } else {
                    self.write_unsent(&mut state).err()
                }
            }
        };
        if let Some(err) = &failed {
            self.kill(Some(err));
        }
        let timeout = self.response_timeout;
        let reply = Reply(slot);
        async move {
            match tokio::time::timeout(timeout, reply).await {
                Ok(outcome) => outcome,
                // As the multiplexed connection's response timeout says it.
                Err(_) => Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()),
            }
        }
    }

    /// Writes what the socket takes now of the unsent bytes.
    fn write_unsent(&self, state: &mut State) -> RedisResult<()> {
        state.waiting = 0;
        while !state.unsent.is_empty() {
            match (&self.stream).write(&state.unsent) {
                Ok(0) => return Err(broken("the socket took nothing")),
                Ok(written) => {
                    let _ = state.unsent.split_to(written);
                }
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    fn flush(&self) {
        let failed = {
            let mut state = self.lock();
            if state.dead {
                return;
            }
            self.write_unsent(&mut state).err()
        };
        if let Some(err) = failed {
            self.kill(Some(&err));
        }
    }

    fn on_readable(&self) -> bool {
        let mut woken = Vec::new();
        let failed = {
            let mut state = self.lock();
            if state.dead {
                return false;
            }
            let failed = self.read_available(&mut state).err();
            // What was read is settled even when the socket then failed.
            let unparsable = settle_replies(&mut state, &mut woken).err();
            failed.or(unparsable)
        };
        if let Some(err) = failed {
            self.kill(Some(&err));
        }
        for waker in woken {
            waker.wake();
        }
        !self.is_dead()
    }

    /// Reads everything the socket has now.
    fn read_available(&self, state: &mut State) -> RedisResult<()> {
        loop {
            state.read.reserve(16 * 1024);
            let spare = state.read.spare_capacity_mut();
            // SAFETY: `recv` writes at most `spare.len()` bytes into the spare capacity.
            let got = unsafe {
                libc::recv(
                    self.stream.as_raw_fd(),
                    spare.as_mut_ptr().cast(),
                    spare.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if got > 0 {
                let len = state.read.len();
                // SAFETY: `recv` initialised `got` more bytes.
                unsafe { state.read.set_len(len + got as usize) };
                continue;
            }
            if got == 0 {
                return Err(broken("the server closed the connection"));
            }
            let err = std::io::Error::last_os_error();
            match err.kind() {
                std::io::ErrorKind::WouldBlock => return Ok(()),
                std::io::ErrorKind::Interrupted => {}
                _ => return Err(err.into()),
            }
        }
    }

    /// Marks the link dead, closes its socket and fails every call still waiting on it.
    fn kill(&self, why: Option<&RedisError>) {
        let slots: Vec<Arc<Slot>> = {
            let mut state = self.lock();
            if state.dead {
                return;
            }
            state.dead = true;
            state.unsent.clear();
            state.in_flight.drain(..).collect()
        };
        if let Some(err) = why {
            tracing::debug!("loop link failed (calls go to the client's connection): {err}");
        }
        // Wakes the loop's watch of the socket, which then lets it go. Not in a forked child,
        // where it would shut the parent's link down too: dropping the link closes the child's
        // copy only.
        if self.generation == crate::foundation::ids::generation() {
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
        }
        for slot in slots {
            let waker = {
                let mut got = slot.lock();
                got.outcome = Some(Err(match why {
                    Some(err) => broken(&format!("the connection broke: {err}")),
                    None => broken("the connection was closed"),
                }));
                got.waker.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }

    /// Kills the link (the client closed).
    pub(crate) fn close(&self) {
        self.kill(None);
    }
}

/// Parses the complete replies read and settles the calls they answer.
fn settle_replies(state: &mut State, woken: &mut Vec<Waker>) -> RedisResult<()> {
    let State {
        read,
        codec,
        in_flight,
        ..
    } = state;
    while let Some(value) = codec.decode(read)? {
        let Some(slot) = in_flight.front() else {
            return Err(broken("a reply no call asked for"));
        };
        let mut got = slot.lock();
        if got.skip > 0 {
            got.skip -= 1;
            continue;
        }
        got.values.push(value);
        if got.values.len() == got.want {
            let values = std::mem::take(&mut got.values);
            got.outcome = Some(Ok(values));
            woken.extend(got.waker.take());
            drop(got);
            in_flight.pop_front();
        }
    }
    Ok(())
}

/// With writes deferred, how many commands wait before they are written without the loop's
/// flush: half of those in flight (at most 32), so that the server works on one half while the
/// loop's tasks make the other; a link with nothing in flight writes at once. Measured
/// (bench/NOTES.md, 2026-11-30): batching a whole turn's commands made the loop and the server
/// wait on each other in turn, at 4 and 16 concurrent calls slower than no batching at all.
fn deferred_at_most(state: &State) -> usize {
    (state.in_flight.len() / 2).clamp(1, 32)
}

fn broken(what: &str) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        what.to_owned(),
    ))
}

/// The replies of one call (a link that dies fails every call waiting on it).
struct Reply(Arc<Slot>);

impl Future for Reply {
    type Output = RedisResult<Vec<Value>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut got = self.0.lock();
        if let Some(outcome) = got.outcome.take() {
            return Poll::Ready(outcome);
        }
        match &got.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => got.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}
