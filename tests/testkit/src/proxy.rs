//! A TCP proxy between a client and a real redis-server that injects network faults on
//! command: delays, lost replies, a silent network, dropped connections, a refusing port.
//!
//! Plain std threads: one accepts, and each proxied connection has one thread per direction.
//! The fault is looked up for every chunk read, so a change applies at once to open
//! connections as well as new ones.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How the proxy treats traffic; see [`FaultProxy::set`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward both ways.
    Pass,
    /// Forward each chunk, both ways, only once this long has passed since it arrived.
    Delay(Duration),
    /// Forward requests; discard every byte of the replies. Connections stay open.
    DropReplies,
    /// Forward nothing either way. Connections stay open, new ones are accepted.
    BlackHole,
    /// Forward requests; when a reply arrives, discard it and close both sides.
    CutAfterForward,
    /// Close every connection and stop listening: connecting is refused.
    Refuse,
}

/// What one direction of a connection does with a chunk it read.
enum Action {
    ForwardAfter(Duration),
    Discard,
    Close,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Reply,
}

impl Fault {
    fn action(self, direction: Direction) -> Action {
        match (self, direction) {
            (Fault::Pass, _) => Action::ForwardAfter(Duration::ZERO),
            (Fault::Delay(delay), _) => Action::ForwardAfter(delay),
            (Fault::DropReplies, Direction::Request) => Action::ForwardAfter(Duration::ZERO),
            (Fault::DropReplies, Direction::Reply) => Action::Discard,
            (Fault::BlackHole, _) => Action::Discard,
            (Fault::CutAfterForward, Direction::Request) => Action::ForwardAfter(Duration::ZERO),
            (Fault::CutAfterForward, Direction::Reply) => Action::Close,
            // A connection accepted just before the refusal closes on its next chunk.
            (Fault::Refuse, _) => Action::Close,
        }
    }
}

/// Both sockets of one proxied connection, kept to close it from outside its threads.
struct Link {
    client: TcpStream,
    server: TcpStream,
}

impl Link {
    fn close(&self) {
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }
}

struct State {
    fault: Fault,
    /// Bumped by every `set`, so a `refuse_for` timer never undoes a later change.
    generation: u64,
    /// `None` while refusing.
    listener: Option<TcpListener>,
    links: HashMap<u64, Link>,
    next_link: u64,
    threads: Vec<JoinHandle<()>>,
    stopping: bool,
    /// Chunks of replies read from the server and not forwarded (dropped, black-holed, cut).
    replies_lost: u64,
}

struct Shared {
    port: u16,
    upstream: SocketAddr,
    state: Mutex<State>,
    /// Wakes `refuse_for` timers when the proxy stops.
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not make every later call panic too.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A fault-injecting proxy on a free loopback port in front of `127.0.0.1:upstream_port`.
/// Dropping it closes the listener and every connection and ends its threads.
pub struct FaultProxy {
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

/// How often the acceptor looks for new connections (the listener is non-blocking so that
/// `set(Fault::Refuse)` can close it at any moment).
const ACCEPT_POLL: Duration = Duration::from_millis(2);
const READ_CHUNK: usize = 16 * 1024;

impl FaultProxy {
    /// Listens on a free 127.0.0.1 port, passing traffic to `127.0.0.1:upstream_port`.
    pub fn start(upstream_port: u16) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let port = listener.local_addr().expect("listener address").port();
        let shared = Arc::new(Shared {
            port,
            upstream: SocketAddr::from(([127, 0, 0, 1], upstream_port)),
            state: Mutex::new(State {
                fault: Fault::Pass,
                generation: 0,
                listener: Some(listener),
                links: HashMap::new(),
                next_link: 0,
                threads: Vec::new(),
                stopping: false,
                replies_lost: 0,
            }),
            changed: Condvar::new(),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("fault-proxy-{port}-accept"))
                .spawn(move || accept_loop(&shared))
                .expect("spawn the acceptor")
        };
        FaultProxy {
            shared,
            acceptor: Some(acceptor),
        }
    }

    pub fn port(&self) -> u16 {
        self.shared.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.shared.port)
    }

    /// Switches the fault for open and new connections. Panics if the port cannot be
    /// listened on again after a refusal (see [`FaultProxy::try_set`]).
    pub fn set(&self, fault: Fault) {
        if let Err(err) = self.try_set(fault) {
            panic!("fault proxy on port {}: {err}", self.shared.port);
        }
    }

    /// [`FaultProxy::set`], with the error of listening again on the same port.
    pub fn try_set(&self, fault: Fault) -> io::Result<()> {
        apply(&self.shared, fault).map(|_| ())
    }

    /// The current fault.
    pub fn fault(&self) -> Fault {
        self.shared.lock().fault
    }

    /// Closes every open connection (both sides) now; new ones follow the current fault.
    pub fn cut(&self) {
        close_all(&mut self.shared.lock());
    }

    /// Refuses connections now and passes traffic again after `duration`, unless the fault
    /// was changed in between.
    pub fn refuse_for(&self, duration: Duration) {
        let generation = apply(&self.shared, Fault::Refuse).expect("refusing never listens");
        let shared = Arc::clone(&self.shared);
        let timer = thread::Builder::new()
            .name(format!("fault-proxy-{}-refuse-timer", self.shared.port))
            .spawn(move || {
                let state = shared.lock();
                let (state, _) = shared
                    .changed
                    .wait_timeout_while(state, duration, |state| {
                        !state.stopping && state.generation == generation
                    })
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if state.stopping || state.generation != generation {
                    return;
                }
                drop(state);
                // Nobody is left to report to: a failure shows as connections still refused.
                let _ = apply(&shared, Fault::Pass);
            })
            .expect("spawn the refuse timer");
        keep_thread(&mut self.shared.lock(), timer);
    }

    /// How many chunks of replies the proxy has read from the server and kept from the
    /// client so far (`DropReplies`, `BlackHole`, `CutAfterForward`); one reply is one chunk
    /// unless it is large. A test waits for this, not only for the command's effect on the
    /// server, before it lets traffic pass again: the reply reaches the proxy a moment after
    /// the effect is visible, and a reply read after the switch is forwarded.
    pub fn replies_lost(&self) -> u64 {
        self.shared.lock().replies_lost
    }

    /// Proxied connections open now (each is one client connection and its upstream twin).
    pub fn connections(&self) -> usize {
        self.shared.lock().links.len()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        let threads = {
            let mut state = self.shared.lock();
            state.stopping = true;
            state.listener = None;
            close_all(&mut state);
            std::mem::take(&mut state.threads)
        };
        self.shared.changed.notify_all();
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        // The acceptor is gone, so no thread is added after this point except by a
        // refuse timer's `apply`, which sees `stopping` and adds none.
        for thread in threads {
            let _ = thread.join();
        }
        let late = std::mem::take(&mut self.shared.lock().threads);
        for thread in late {
            let _ = thread.join();
        }
    }
}

/// Sets the fault; returns the generation it started.
fn apply(shared: &Shared, fault: Fault) -> io::Result<u64> {
    let mut state = shared.lock();
    if state.stopping {
        return Ok(state.generation);
    }
    state.generation += 1;
    state.fault = fault;
    if fault == Fault::Refuse {
        state.listener = None;
        close_all(&mut state);
    } else if state.listener.is_none() {
        state.listener = Some(listen_again(shared.port)?);
    }
    let generation = state.generation;
    drop(state);
    shared.changed.notify_all();
    Ok(generation)
}

/// Binds the proxy's port again. Retried for a while: in the gap since the refusal the
/// kernel may have lent the port to an outgoing connection.
fn listen_again(port: u16) -> io::Result<TcpListener> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpListener::bind(("127.0.0.1", port)) {
            Ok(listener) => {
                listener.set_nonblocking(true)?;
                return Ok(listener);
            }
            Err(err) if Instant::now() >= deadline => return Err(err),
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn close_all(state: &mut State) {
    for (_, link) in state.links.drain() {
        link.close();
    }
}

/// Keeps a thread's handle for `Drop` to join, forgetting the ones that already ended.
fn keep_thread(state: &mut State, thread: JoinHandle<()>) {
    state.threads.retain(|thread| !thread.is_finished());
    state.threads.push(thread);
}

fn accept_loop(shared: &Arc<Shared>) {
    loop {
        let accepted = {
            let state = shared.lock();
            if state.stopping {
                return;
            }
            state.listener.as_ref().map(|listener| listener.accept())
        };
        match accepted {
            Some(Ok((client, _))) => open_link(shared, client),
            // Refusing, nothing waiting, or a connection that went away before accept.
            _ => thread::sleep(ACCEPT_POLL),
        }
    }
}

fn open_link(shared: &Arc<Shared>, client: TcpStream) {
    let Ok(server) = TcpStream::connect_timeout(&shared.upstream, Duration::from_secs(2)) else {
        // Upstream down: the client sees its connection close, as with a dead server.
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let setup = || -> io::Result<[TcpStream; 4]> {
        client.set_nonblocking(false)?;
        client.set_nodelay(true)?;
        server.set_nodelay(true)?;
        Ok([
            client.try_clone()?,
            server.try_clone()?,
            server.try_clone()?,
            client.try_clone()?,
        ])
    };
    let Ok([client_reader, server_writer, server_reader, client_writer]) = setup() else {
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
        return;
    };
    let mut state = shared.lock();
    if state.stopping || state.fault == Fault::Refuse {
        // Accepted just before the listener closed.
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
        return;
    }
    let id = state.next_link;
    state.next_link += 1;
    state.links.insert(id, Link { client, server });
    for (direction, from, to) in [
        (Direction::Request, client_reader, server_writer),
        (Direction::Reply, server_reader, client_writer),
    ] {
        let pump_shared = Arc::clone(shared);
        let name = format!("fault-proxy-{}-link-{id}", shared.port);
        match thread::Builder::new()
            .name(name)
            .spawn(move || pump(&pump_shared, id, direction, from, to))
        {
            Ok(thread) => keep_thread(&mut state, thread),
            Err(_) => {
                if let Some(link) = state.links.remove(&id) {
                    link.close();
                }
            }
        }
    }
}

/// Copies one direction of a connection chunk by chunk, as the fault at each chunk's
/// arrival says. When either side ends, the whole connection is closed.
fn pump(shared: &Shared, id: u64, direction: Direction, mut from: TcpStream, mut to: TcpStream) {
    let mut buffer = vec![0u8; READ_CHUNK];
    // Chunks waiting for their time (a delay), in arrival order.
    let mut pending: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    'copy: loop {
        // Wake up for the next delayed chunk even if nothing more arrives.
        let wait = pending.front().map(|(due, _)| {
            due.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        });
        if from.set_read_timeout(wait).is_err() {
            break;
        }
        match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => {
                let mut state = shared.lock();
                let action = state.fault.action(direction);
                if direction == Direction::Reply && !matches!(action, Action::ForwardAfter(_)) {
                    state.replies_lost += 1;
                }
                drop(state);
                match action {
                    Action::ForwardAfter(delay) => {
                        pending.push_back((Instant::now() + delay, buffer[..read].to_vec()));
                    }
                    Action::Discard => {}
                    Action::Close => break,
                }
            }
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
        while pending
            .front()
            .is_some_and(|(due, _)| *due <= Instant::now())
        {
            let (_, chunk) = pending.pop_front().expect("a pending chunk");
            if to.write_all(&chunk).is_err() {
                break 'copy;
            }
        }
    }
    if let Some(link) = shared.lock().links.remove(&id) {
        link.close();
    }
}
