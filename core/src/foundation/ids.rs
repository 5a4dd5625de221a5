//! The ids that must be unique among every process using a lock: request ids, client ids (and
//! the random pauses of lock groups), unique across `fork()` too.
//!
//! A forked child starts from a copy of its parent's memory, user-space random generators
//! included: uuid's `fast-rng` (rand's `ThreadRng`, which rand 0.9+ no longer reseeds on fork)
//! made every child of a parent that had used polylock produce the parent's next ids, the same
//! in each child. Waiters of different processes then listed under one request id took each
//! other's grants, and the lock passed on only when an unrenewed lease ran out.
//!
//! So each thread counts from a 128-bit start drawn from the OS generator, and draws a new one
//! when its process is not the one it drew in: `pthread_atfork` bumps a generation in every
//! forked child, so telling costs an atomic load rather than a `getpid` system call per id.
//! An id is the count passed through a bijection of 128 bits: distinct within a stream by
//! construction, and two streams' ids meet with a chance of about n / 2^128.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh request id: 32 lowercase hex characters (no ':', as key names and messages need).
pub(crate) fn request_id() -> String {
    // uuid's encoder writes the 128 bits as `{:032x}` would, without the formatting machinery
    // (one request id per acquire).
    let mut hex = [0u8; uuid::fmt::Simple::LENGTH];
    uuid::Uuid::from_u128(next())
        .simple()
        .encode_lower(&mut hex)
        .to_owned()
}

/// A fresh client id, a UUID v4 in its usual hyphenated form (Redisson's owners are
/// `<uuid>:<thread>`, and tools read them so).
pub(crate) fn client_id() -> String {
    uuid::Builder::from_random_bytes(next().to_be_bytes())
        .into_uuid()
        .to_string()
}

/// 64 random-looking bits, distinct from every other process's (for jitter).
/// The default client name: `host:pid` (the host as the OS names it, `localhost` if it
/// cannot).
pub(crate) fn default_client_name() -> String {
    format!("{}:{}", host_name(), std::process::id())
}

#[cfg(unix)]
pub(crate) fn host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer outlives the call and its length is passed; gethostname writes at most
    // that many bytes.
    let status = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    match std::str::from_utf8(&buffer[..end]) {
        Ok(host) if status == 0 && !host.is_empty() => host.to_owned(),
        _ => "localhost".to_owned(),
    }
}

#[cfg(not(unix))]
pub(crate) fn host_name() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_else(|_| "localhost".to_owned())
}

pub(crate) fn random_u64() -> u64 {
    next() as u64
}

#[derive(Clone, Copy)]
struct Stream {
    /// The process generation (see [`generation`]) the start was drawn in.
    generation: u64,
    next: u128,
}

thread_local! {
    static STREAM: Cell<Option<Stream>> = const { Cell::new(None) };
}

/// Test only (the protocol explorer): this thread's ids count from `start` from now on, so
/// that a replay of the same steps makes the same ids.
#[cfg(feature = "explorer")]
pub fn count_from(start: u128) {
    STREAM.with(|stream| {
        stream.set(Some(Stream {
            generation: generation(),
            next: start,
        }))
    });
}

fn next() -> u128 {
    let generation = generation();
    STREAM.with(|stream| {
        let (id, advanced) = advance(stream.get(), generation, draw_start);
        stream.set(Some(advanced));
        id
    })
}

/// The next id of `stream`, and the stream after it; a stream of another generation (or none
/// yet) starts over from `draw()`.
fn advance(stream: Option<Stream>, generation: u64, draw: impl FnOnce() -> u128) -> (u128, Stream) {
    let current = match stream {
        Some(stream) if stream.generation == generation => stream,
        _ => Stream {
            generation,
            next: draw(),
        },
    };
    let advanced = Stream {
        generation,
        next: current.next.wrapping_add(1),
    };
    (scramble(current.next), advanced)
}

/// A bijection of 128 bits (each step is: xor with a right shift of itself, or a product with
/// an odd number), so that successive counts give unrelated-looking ids.
fn scramble(mut x: u128) -> u128 {
    x ^= x >> 64;
    x = x.wrapping_mul(0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645);
    x ^= x >> 61;
    x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835);
    x ^ (x >> 64)
}

fn draw_start() -> u128 {
    let mut bytes = [0u8; 16];
    match getrandom::fill(&mut bytes) {
        Ok(()) => u128::from_ne_bytes(bytes),
        // No OS generator (a sandbox without getrandom or /dev/urandom): the pid keeps
        // processes apart and the clock keeps a process apart from its predecessors.
        Err(_) => fallback_start(),
    }
}

fn fallback_start() -> u128 {
    use std::time::{SystemTime, UNIX_EPOCH};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    let draw = DRAWS.fetch_add(1, Ordering::Relaxed);
    (u128::from(std::process::id()) << 96) ^ (u128::from(draw) << 64) ^ u128::from(nanos)
}

/// How many times this process's ancestry forked since the fork hook was set: a child sees one
/// more than its parent did.
#[cfg(unix)]
pub(crate) fn generation() -> u64 {
    use std::sync::atomic::AtomicBool;
    use std::sync::Once;

    static FORKS: AtomicU64 = AtomicU64::new(0);
    /// Set when the hook could not be set: then the pid tells processes apart.
    static NO_HOOK: AtomicBool = AtomicBool::new(false);
    static HOOK: Once = Once::new();

    // Runs in the child, right after fork() (only async-signal-safe work: one atomic add).
    extern "C" fn forked() {
        FORKS.fetch_add(1, Ordering::Relaxed);
    }

    HOOK.call_once(|| {
        // SAFETY: registers a handler that only touches a static atomic (glibc unregisters it
        // should this library be unloaded: pthread_atfork passes the library's handle).
        if unsafe { libc::pthread_atfork(None, None, Some(forked)) } != 0 {
            NO_HOOK.store(true, Ordering::Relaxed);
        }
    });
    if NO_HOOK.load(Ordering::Relaxed) {
        return u64::from(std::process::id()) | 1 << 63;
    }
    FORKS.load(Ordering::Relaxed)
}

/// No fork without unix.
#[cfg(not(unix))]
pub(crate) fn generation() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn request_ids_are_32_hex_digits_and_distinct() {
        let ids: Vec<String> = (0..10_000).map(|_| request_id()).collect();
        for id in &ids {
            assert_eq!(id.len(), 32, "{id}");
            assert!(id
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    }

    #[test]
    fn client_ids_are_uuid_v4_and_distinct() {
        let ids: Vec<String> = (0..1_000).map(|_| client_id()).collect();
        for id in &ids {
            let parsed = uuid::Uuid::parse_str(id).expect("a UUID");
            assert_eq!(parsed.get_version_num(), 4, "{id}");
            assert_eq!(parsed.hyphenated().to_string(), *id);
        }
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    }

    #[test]
    fn threads_draw_streams_of_their_own() {
        let per_thread: Vec<Vec<String>> = (0..4)
            .map(|_| std::thread::spawn(|| (0..1_000).map(|_| request_id()).collect()))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|thread| thread.join().unwrap())
            .collect();
        let all: HashSet<&String> = per_thread.iter().flatten().collect();
        assert_eq!(all.len(), 4_000);
    }

    #[test]
    fn a_copied_stream_starts_over_in_a_new_generation() {
        // What fork does: the child holds a copy of the parent's stream.
        let (_, parent) = advance(None, 0, || 7);
        let (parent_next, _) = advance(Some(parent), 0, || unreachable!("same generation"));
        let (child_next, child) = advance(Some(parent), 1, || 1 << 100);
        assert_ne!(child_next, parent_next);
        assert_eq!(child_next, scramble(1 << 100));
        assert_eq!(child.generation, 1);
        assert_eq!(child.next, (1 << 100) + 1);
    }

    #[test]
    fn scramble_is_a_bijection_on_a_sample() {
        let start = u128::MAX - 500; // across the wrap too
        let outputs: HashSet<u128> = (0..1_000u128)
            .map(|i| scramble(start.wrapping_add(i)))
            .collect();
        assert_eq!(outputs.len(), 1_000);
    }

    /// The reported failure, in one process: a parent that made ids forks; the child's next id
    /// must not be the parent's next id (with a generator copied by fork it was).
    #[cfg(unix)]
    #[test]
    fn a_forked_child_makes_ids_its_parent_does_not() {
        let _ = request_id(); // this thread's stream exists, as in a parent that used polylock
        let mut fds = [0; 2];
        // SAFETY: a two-element array for pipe(2).
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let [read_end, write_end] = fds;
        // SAFETY: the child only makes ids (glibc's fork leaves malloc usable), writes them to
        // the pipe and leaves with _exit, never returning into the test harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ids = format!("{} {}", request_id(), client_id());
            // SAFETY: a valid buffer and fd; _exit runs no destructors of the parent's state.
            unsafe {
                libc::write(write_end, ids.as_ptr().cast(), ids.len());
                libc::_exit(0);
            }
        }
        let parent = format!("{} {}", request_id(), client_id());
        let mut buffer = [0u8; 256];
        // SAFETY: closes our copy of the write end, so read ends when the child's closes.
        unsafe { libc::close(write_end) };
        let mut child = Vec::new();
        loop {
            // SAFETY: a valid buffer and fd.
            let n = unsafe { libc::read(read_end, buffer.as_mut_ptr().cast(), buffer.len()) };
            if n <= 0 {
                break;
            }
            child.extend_from_slice(&buffer[..n as usize]);
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe {
            libc::waitpid(pid, &mut status, 0);
            libc::close(read_end);
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        let child = String::from_utf8(child).unwrap();
        let (child_request, child_client) = child.split_once(' ').expect("two ids");
        let (parent_request, parent_client) = parent.split_once(' ').unwrap();
        assert_eq!(child_request.len(), 32, "{child}");
        assert_ne!(child_request, parent_request);
        assert_ne!(child_client, parent_client);
    }
}
