//! The one tokio runtime that the core and every binding spawn onto.
//!
//! A runtime's worker threads do not survive `fork()`: a child that used its parent's runtime
//! would wait forever for tasks nobody runs. So the runtime remembers the process that built
//! it, and a forked child gets a fresh one on first use.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll};

use tokio::runtime::Runtime;

struct Owned {
    /// The fork generation (`ids::generation`) of the process that built it.
    generation: u64,
    runtime: &'static Runtime,
}

/// The runtime of the current generation, read without a lock: every lock and release asks for
/// it, and a global mutex (with a `getpid` per call) made 64 concurrent holders queue on it.
static CURRENT: AtomicPtr<Owned> = AtomicPtr::new(std::ptr::null_mut());
/// Serialises building a runtime (at first use, and once in each forked child).
static BUILDING: Mutex<()> = Mutex::new(());

/// The runtime of this process, built on first use (and again after a fork).
pub fn runtime() -> &'static Runtime {
    #[cfg(feature = "explorer")]
    if let Some(runtime) = EXPLORED.with(std::cell::Cell::get) {
        return runtime;
    }
    let generation = crate::foundation::ids::generation();
    if let Some(runtime) = current(generation) {
        return runtime;
    }
    let _building = BUILDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(runtime) = current(generation) {
        return runtime;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("polylock")
        .enable_all()
        .build()
        .expect("polylock: cannot start the tokio runtime (out of threads?)");
    let runtime: &'static Runtime = Box::leak(Box::new(runtime));
    // Leaked, as the runtime is: one per process generation, read by any thread at any time.
    let owned = Box::leak(Box::new(Owned {
        generation,
        runtime,
    }));
    CURRENT.store(owned, Ordering::Release);
    runtime
}

#[cfg(feature = "explorer")]
thread_local! {
    /// The protocol explorer's runtime on this thread (one thread, a paused clock), which
    /// everything the core starts runs on while it is set.
    static EXPLORED: std::cell::Cell<Option<&'static Runtime>> = const { std::cell::Cell::new(None) };
}

/// Test only: the core runs on `runtime` on this thread from now on (`None`: its own again).
#[cfg(feature = "explorer")]
pub fn explore_on(runtime: Option<&'static Runtime>) {
    EXPLORED.with(|explored| explored.set(runtime));
}

/// The runtime built in `generation`, if the latest one was.
fn current(generation: u64) -> Option<&'static Runtime> {
    let owned = CURRENT.load(Ordering::Acquire);
    // SAFETY: a non-null pointer was stored from a leaked Box, never freed.
    let owned = unsafe { owned.as_ref() }?;
    (owned.generation == generation).then_some(owned.runtime)
}

pub(crate) fn current_pid() -> u32 {
    std::process::id()
}

/// Runs `work` on the core's runtime (whatever runtime, if any, the caller awaits on).
pub(crate) async fn on_runtime<T, F>(what: &str, work: F) -> crate::Result<T>
where
    T: Send + 'static,
    F: Future<Output = crate::Result<T>> + Send + 'static,
{
    Inline::new(work, || {
        crate::Error::redis(format!("{what}: task failed: it panicked"))
    })
    .await
}

/// Runs `work` on the caller's task, inside the core runtime's context (the timers it starts
/// and the tasks it spawns are the core runtime's, whatever runtime, if any, the caller awaits
/// on), so a call costs no spawned task and none of its two cross-thread wake-ups. Dropped
/// before it finishes, it hands the rest of `work` to the core's runtime as a task, as if it
/// had been spawned from the start: work under way always finishes. A panic in `work` becomes
/// the error `on_panic` makes, never an unwind into the caller (a binding's language).
pub(crate) struct Inline<F, E>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    runtime: &'static Runtime,
    work: Option<Pin<Box<F>>>,
    on_panic: Option<E>,
    /// The runtime the caller awaits on, if any (`caller_runtime`).
    caller: Option<tokio::runtime::Handle>,
}

thread_local! {
    /// The caller's runtime while an `Inline` polls its work on this thread.
    static CALLER: std::cell::RefCell<Option<tokio::runtime::Handle>> =
        const { std::cell::RefCell::new(None) };
}

/// The runtime of the caller whose call is being polled on this thread, inside polylock's
/// runtime context: a single server's connection sends that call's commands on a connection
/// of that runtime's (`connection::per_runtime`). `None` in polylock's own tasks.
pub(crate) fn caller_runtime() -> Option<tokio::runtime::Handle> {
    CALLER.with(|caller| caller.borrow().clone())
}

impl<T, F, E> Inline<F, E>
where
    T: Send + 'static,
    F: Future<Output = crate::Result<T>> + Send + 'static,
    E: FnOnce() -> crate::Error + Unpin,
{
    pub(crate) fn new(work: F, on_panic: E) -> Self {
        Inline {
            runtime: runtime(),
            work: Some(Box::pin(work)),
            on_panic: Some(on_panic),
            // A call made inside another's work keeps the outer caller's runtime.
            caller: caller_runtime().or_else(|| tokio::runtime::Handle::try_current().ok()),
        }
    }
}

impl<T, F, E> Future for Inline<F, E>
where
    T: Send + 'static,
    F: Future<Output = crate::Result<T>> + Send + 'static,
    E: FnOnce() -> crate::Error + Unpin,
{
    type Output = crate::Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let work = this
            .work
            .as_mut()
            .expect("polylock: Inline polled after it finished");
        let _context = this.runtime.enter();
        let outer = CALLER.with(|caller| caller.replace(this.caller.clone()));
        let polled = catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx)));
        CALLER.with(|caller| *caller.borrow_mut() = outer);
        match polled {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => {
                this.work = None;
                Poll::Ready(output)
            }
            Err(_) => {
                let work = this.work.take();
                let _ = catch_unwind(AssertUnwindSafe(move || drop(work)));
                let on_panic = this.on_panic.take().expect("set until the work ends");
                Poll::Ready(Err(on_panic()))
            }
        }
    }
}

impl<F, E> Drop for Inline<F, E>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            self.runtime.spawn(work);
        }
    }
}
