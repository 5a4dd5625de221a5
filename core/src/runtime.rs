//! The one tokio runtime that the core and every binding spawn onto.
//!
//! A runtime's worker threads do not survive `fork()`: a child that used its parent's runtime
//! would wait forever for tasks nobody runs. So the runtime remembers the process that built
//! it, and a forked child gets a fresh one on first use.

use std::sync::Mutex;

use tokio::runtime::Runtime;

struct Owned {
    pid: u32,
    runtime: &'static Runtime,
}

static RUNTIME: Mutex<Option<Owned>> = Mutex::new(None);

/// The runtime of this process, built on first use (and again after a fork).
pub fn runtime() -> &'static Runtime {
    let pid = std::process::id();
    let mut slot = RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match &*slot {
        Some(owned) if owned.pid == pid => owned.runtime,
        _ => {
            // The parent's runtime (if any) is leaked, never dropped: dropping it in the child
            // would join threads that do not exist here.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("polylock")
                .enable_all()
                .build()
                .expect("polylock: cannot start the tokio runtime (out of threads?)");
            let runtime: &'static Runtime = Box::leak(Box::new(runtime));
            *slot = Some(Owned { pid, runtime });
            runtime
        }
    }
}

/// The id of the process this code runs in; a client compares it with its creator's.
pub(crate) fn current_pid() -> u32 {
    std::process::id()
}

/// Runs `work` on the core's runtime (whatever runtime, if any, the caller awaits on).
pub(crate) async fn on_runtime<T, F>(what: &str, work: F) -> crate::Result<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = crate::Result<T>> + Send + 'static,
{
    runtime()
        .spawn(work)
        .await
        .map_err(|err| crate::Error::Redis(format!("{what}: task failed: {err}")))?
}
