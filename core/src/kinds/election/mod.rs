//! The scripts of leader election (`crate::client::election`): announcing a leader's value
//! while it holds the election's fenced lock, reading the leader, withdrawing on resign. Every
//! one takes the same keys: the lock, the record (`keys::election_record`), the change channel
//! (`keys::election_channel`), all in the name's hash slot.

use std::sync::LazyLock;

use crate::kinds::script::LockScript;

pub(crate) static ANNOUNCE: LazyLock<LockScript> = lock_script!("announce.lua");
pub(crate) static LEADER: LazyLock<LockScript> = lock_script!("leader.lua");
pub(crate) static WITHDRAW: LazyLock<LockScript> = lock_script!("withdraw.lua");
