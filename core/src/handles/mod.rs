//! The handles: what a client makes and a caller holds. [`guard::Hold`] (what every thing you
//! hold offers) and [`guard::Guard`], its RAII face; the lock of every kind, the read-write
//! lock, the semaphores (and a semaphore's permits), the count-down latch, the groups of locks
//! (`multi`), and the read-only snapshot of a name (`inspect`).

pub(crate) mod expirable_semaphore;
pub(crate) mod guard;
pub(crate) mod inspect;
pub(crate) mod latch;
pub(crate) mod lock;
pub(crate) mod multi;
pub(crate) mod named;
pub(crate) mod read_write_lock;
pub(crate) mod semaphore;
pub(crate) mod semaphore_permits;
