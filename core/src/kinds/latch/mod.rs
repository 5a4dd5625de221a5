//! The count-down latch (Redisson RCountDownLatch): a STRING at the name holding the count as
//! a plain number; no key means open (count 0). Its channel is
//! `redisson_countdownlatch__channel__{name}` (see [`crate::keys::latch_channel`]): `1` when a
//! count was set or the latch deleted (waiters look again), `0` when a count down reached zero.
//! Not a lock kind: nothing is held, so the engine has no part in it (`crate::handles::latch`).

use std::sync::LazyLock;

use crate::kinds::script::LockScript;

pub(crate) static TRY_SET: LazyLock<LockScript> = lock_script!("try_set.lua");
pub(crate) static COUNT_DOWN: LazyLock<LockScript> = lock_script!("count_down.lua");
pub(crate) static DELETE: LazyLock<LockScript> = lock_script!("delete.lua");
