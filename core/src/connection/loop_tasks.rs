//! Futures polled on a foreign event loop's thread: the other half of a loop link
//! (`loop_link`). A binding whose loop watches a link's socket polls the calls made on the
//! loop's thread here, so that their commands go out through the link and their replies, read
//! on that thread, wake them there (issue 44: Node's libuv loop, Python's asyncio loop).
//!
//! - A future is polled first when it is spawned, so its command is written before the call
//!   returns; then whenever it is woken.
//! - Every poll runs inside polylock's runtime context: the engine's timers and spawned tasks
//!   are polylock's.
//! - A wake on the loop's thread while it polls (a reply read, a task woken by another) only
//!   queues the task: the pass in progress polls it. Any other wake (a timer, pub/sub, a
//!   cancel from the binding's code) queues it and rings the binding's bell, which makes the
//!   loop call [`LoopTasks::run_ready`].
//! - [`LoopTasks::hand_over`] (the loop goes away) moves the futures still pending to polylock's
//!   runtime, which runs them to the end and drops their outcomes: what they acquired is
//!   released as its handle goes, as for any dropped call.

use std::cell::Cell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::ThreadId;

use super::loop_link::with_flag_set;
use crate::foundation::ids::generation;
use crate::foundation::runtime::runtime;

thread_local! {
    /// Set while this thread polls loop tasks.
    static POLLING: Cell<bool> = const { Cell::new(false) };
}

type TaskFuture<O> = Pin<Box<dyn Future<Output = O> + Send>>;
type Bell = Box<dyn Fn() + Send + Sync>;

/// The futures of one loop's thread. Cloning gives another handle on the same tasks.
pub struct LoopTasks<O: Send + 'static> {
    shared: Arc<Shared<O>>,
}

impl<O: Send + 'static> Clone for LoopTasks<O> {
    fn clone(&self) -> Self {
        LoopTasks {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<O> {
    /// The tasks woken and not polled since.
    ready: Mutex<Vec<Arc<Task<O>>>>,
    /// Tells the loop to call `run_ready`; `None` once handed over.
    bell: Mutex<Option<Bell>>,
    thread: ThreadId,
    /// Every task not ended (and some ended ones, pruned as more are spawned).
    tasks: Mutex<Vec<Weak<Task<O>>>>,
    pending: AtomicUsize,
    /// The fork generation it was made in.
    generation: u64,
}

struct Task<O> {
    future: Mutex<Option<TaskFuture<O>>>,
    shared: Arc<Shared<O>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl<O> Wake for Task<O> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let bell = lock(&self.shared.bell);
        // Handed over: its future went to the runtime.
        let Some(bell) = &*bell else {
            return;
        };
        lock(&self.shared.ready).push(Arc::clone(self));
        let polling_here =
            std::thread::current().id() == self.shared.thread && POLLING.with(Cell::get);
        if !polling_here {
            bell();
        }
    }
}

impl<O: Send + 'static> LoopTasks<O> {
    /// The tasks of this thread's loop; `bell` makes the loop call [`LoopTasks::run_ready`]
    /// soon (it may be called from any thread, and must not block).
    pub fn new(bell: impl Fn() + Send + Sync + 'static) -> Self {
        LoopTasks {
            shared: Arc::new(Shared {
                ready: Mutex::new(Vec::new()),
                bell: Mutex::new(Some(Box::new(bell))),
                thread: std::thread::current().id(),
                tasks: Mutex::new(Vec::new()),
                pending: AtomicUsize::new(0),
                generation: generation(),
            }),
        }
    }

    /// Polls `future` now, then on this thread whenever it is woken, until it ends; `done`
    /// gets its output, and that of every other task this pass ended.
    pub fn spawn(&self, future: impl Future<Output = O> + Send + 'static, done: &mut dyn FnMut(O)) {
        let task = Arc::new(Task {
            future: Mutex::new(Some(Box::pin(future) as TaskFuture<O>)),
            shared: Arc::clone(&self.shared),
        });
        let pending = self.shared.pending.fetch_add(1, Ordering::Relaxed) + 1;
        {
            let mut tasks = lock(&self.shared.tasks);
            if tasks.len() >= 2 * pending + 16 {
                tasks.retain(|task| task.strong_count() > 0);
            }
            tasks.push(Arc::downgrade(&task));
        }
        Self::polling(|| {
            self.poll_task(&task, done);
            self.poll_ready(done);
        });
    }

    /// Polls every task woken since the last pass (and those they wake) until none is left.
    pub fn run_ready(&self, done: &mut dyn FnMut(O)) {
        Self::polling(|| self.poll_ready(done));
    }

    /// Runs `work` (a link's `on_readable`, say) as part of a pass: the tasks it wakes on this
    /// thread are queued without ringing the bell. Call [`LoopTasks::run_ready`] after it.
    pub fn polling<R>(work: impl FnOnce() -> R) -> R {
        with_flag_set(&POLLING, work)
    }

    /// How many spawned tasks have not ended.
    pub fn pending(&self) -> usize {
        self.shared.pending.load(Ordering::Relaxed)
    }

    /// The loop goes away: the bell is silenced, and the tasks still pending go on on
    /// polylock's runtime, their outcomes dropped there. In a forked child they are the
    /// parent's calls, which go on in the parent: they are dropped.
    pub fn hand_over(&self) {
        drop(lock(&self.shared.bell).take());
        lock(&self.shared.ready).clear();
        let forked = self.shared.generation != generation();
        let tasks = std::mem::take(&mut *lock(&self.shared.tasks));
        for task in tasks.iter().filter_map(Weak::upgrade) {
            if let Some(future) = lock(&task.future).take() {
                self.shared.pending.fetch_sub(1, Ordering::Relaxed);
                if !forked {
                    runtime().spawn(async move {
                        drop(future.await);
                    });
                }
            }
        }
    }

    fn poll_ready(&self, done: &mut dyn FnMut(O)) {
        loop {
            let ready = std::mem::take(&mut *lock(&self.shared.ready));
            if ready.is_empty() {
                return;
            }
            for task in ready {
                self.poll_task(&task, done);
            }
        }
    }

    /// Polls `task` once; hands its output to `done` when it ends.
    fn poll_task(&self, task: &Arc<Task<O>>, done: &mut dyn FnMut(O)) {
        let _runtime = runtime().enter();
        let mut slot = lock(&task.future);
        let Some(future) = slot.as_mut() else {
            return;
        };
        let waker = Waker::from(Arc::clone(task));
        let mut cx = Context::from_waker(&waker);
        let output = match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
            Ok(Poll::Pending) => return,
            Ok(Poll::Ready(output)) => Some(output),
            // A binding's future catches the work's panics; this one is its own code's.
            Err(_) => None,
        };
        *slot = None;
        drop(slot);
        self.shared.pending.fetch_sub(1, Ordering::Relaxed);
        if let Some(output) = output {
            done(output);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;

    use tokio::sync::oneshot;

    use super::*;

    /// A bell that counts its rings.
    fn counting_bell() -> (Arc<AtomicUsize>, impl Fn() + Send + Sync + 'static) {
        let rings = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&rings);
        (rings, move || {
            counted.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[test]
    fn a_future_ready_at_once_ends_in_the_spawn_without_a_ring() {
        let (rings, bell) = counting_bell();
        let tasks = LoopTasks::new(bell);
        let mut ended = Vec::new();
        tasks.spawn(async { 7 }, &mut |output| ended.push(output));
        assert_eq!(ended, vec![7]);
        assert_eq!(tasks.pending(), 0);
        assert_eq!(rings.load(Ordering::SeqCst), 0);
    }

    /// Spawns a task that ends with what the returned sender sends.
    fn spawn_waiting(tasks: &LoopTasks<u32>, ended: &mut Vec<u32>) -> oneshot::Sender<u32> {
        let (send, receive) = oneshot::channel::<u32>();
        tasks.spawn(async move { receive.await.unwrap_or(0) }, &mut |o| {
            ended.push(o)
        });
        send
    }

    #[test]
    fn a_wake_from_another_thread_rings_the_bell_and_the_next_pass_ends_the_task() {
        let (rings, bell) = counting_bell();
        let tasks = LoopTasks::new(bell);
        let mut ended = Vec::new();
        let send = spawn_waiting(&tasks, &mut ended);
        assert!(ended.is_empty());
        assert_eq!(tasks.pending(), 1);
        std::thread::spawn(move || send.send(5))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(rings.load(Ordering::SeqCst), 1);
        tasks.run_ready(&mut |o| ended.push(o));
        assert_eq!(ended, vec![5]);
        assert_eq!(tasks.pending(), 0);
    }

    #[test]
    fn a_wake_on_the_loops_thread_during_a_pass_is_polled_in_that_pass_without_a_ring() {
        let (rings, bell) = counting_bell();
        let tasks = LoopTasks::new(bell);
        let mut ended = Vec::new();
        let send = spawn_waiting(&tasks, &mut ended);
        // A second task, spawned in a pass, wakes the first: both end in that pass.
        tasks.spawn(
            async move {
                let _ = send.send(9);
                1
            },
            &mut |o| ended.push(o),
        );
        ended.sort_unstable();
        assert_eq!(ended, vec![1, 9]);
        assert_eq!(rings.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn handed_over_tasks_run_to_the_end_on_the_runtime_and_the_bell_is_silent() {
        let (rings, bell) = counting_bell();
        let tasks = LoopTasks::new(bell);
        let (send, receive) = oneshot::channel::<()>();
        let (finished, finishing) = mpsc::channel();
        tasks.spawn(
            async move {
                let _ = receive.await;
                let _ = finished.send(());
            },
            &mut |()| {},
        );
        tasks.hand_over();
        assert_eq!(tasks.pending(), 0);
        let _ = send.send(());
        finishing
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the handed-over task ran to its end on the runtime");
        assert_eq!(rings.load(Ordering::SeqCst), 0);
    }
}
