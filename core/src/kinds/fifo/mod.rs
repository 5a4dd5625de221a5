//! The FIFO lock: polylock's own layout of a fair lock, for users who need no Redisson interop.
//! The lock itself is the reentrant lock's hash (so it excludes every other hash lock of the
//! same name, Redisson's included); the line is a LIST of owners, and each waiter's liveness is
//! a record of its own whose TTL its looks renew, so no script reads a clock, walks the line or
//! keeps deadlines: a release reads the head and its record, and grants the lock to it (a
//! watchdog hold) or tells it to come. A waiter whose record lapsed (its process died) leaves
//! the line when it reaches the head. About half the server calls of the Redisson-layout fair
//! lock per contended hand-over (`bench/NOTES.md`).
//!
//! The lock kind is `queued::Queued`, shared with the fair lock; this file holds its layout.

use std::time::Duration;

use crate::foundation::keys;
use crate::kinds::queued::{queued_scripts, Layout, Queued, Scripts};

/// The FIFO lock: a queued lock in polylock's own layout.
pub(crate) type Fifo = Queued<PolylockLine>;

static SCRIPTS: Scripts = queued_scripts!();

/// A LIST of owners and a record per waiter.
pub(crate) struct PolylockLine;

impl Layout for PolylockLine {
    const KIND_NAME: &'static str = crate::metrics::kind::FIFO_LOCK;

    /// A single try takes no place in line.
    const TRY_TAKES_A_PLACE: bool = false;

    const ALLOWANCE: Option<Duration> = None;

    /// Every FIFO script publishes `0` on the shared channel when it frees the lock with nobody
    /// in line; FIFO waiters listen there too.
    const SHARED_CHANNEL_LAST: bool = true;

    fn scripts() -> &'static Scripts {
        &SCRIPTS
    }

    fn line_keys(key: &str) -> Vec<String> {
        vec![
            keys::fifo_line(key),
            keys::fifo_waiter_prefix(key),
            keys::fifo_channel_prefix(key),
            keys::acquire_latch_prefix(key),
        ]
    }

    fn told_channel(key: &str, owner: &str) -> String {
        keys::fifo_waiter_channel(key, owner)
    }

    /// Its record lives.
    fn still_in_line(pipe: &mut redis::Pipeline, key: &str, owner: &str) {
        pipe.exists(keys::fifo_waiter_record(key, owner));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::queued::tests::{
        busy, free, has_a_place, held, line, release_as, server, undo, ACQUIRED, OTHER, OWNER,
    };
    use crate::kinds::{look_as, AcquireArgs, Attempt, LockKind};
    use crate::settings::options::ClientOptions;
    use redis::Value;

    const REQUEST: &str = "0123456789abcdef0123456789abcdef";

    fn look(request: &str) -> AcquireArgs<'_> {
        AcquireArgs {
            owner: OWNER,
            lease_ms: 30_000,
            request,
            will_wait: true,
            grant_look: Some(1),
            reenters: false,
        }
    }

    /// A look that reaches the server after its request was undone (a copy held back in a
    /// broken connection) takes no place in line: a release would otherwise tell or grant the
    /// lock to a waiter that is gone, and nobody else would get it until the record lapsed.
    #[test]
    fn a_look_that_arrives_after_its_undo_takes_no_place() {
        let (_server, mut con) = server();
        let fifo: Fifo = held(&mut con, "late");
        let options = ClientOptions::default();
        assert_eq!(undo(&fifo, &mut con, OWNER, REQUEST), 0);
        let reply: Value = fifo
            .acquire(&look(REQUEST), &options)
            .invoke(&mut con)
            .unwrap();
        assert_eq!(fifo.read_acquire(reply), Ok(Attempt::Undone));
        let waiting = line(&fifo, &mut con);
        assert!(waiting.is_empty(), "{waiting:?}");
        assert!(!has_a_place(&fifo, &mut con, OWNER));
        // Another request of the owner does take its place.
        let reply: Value = fifo
            .acquire(&look("fedcba9876543210fedcba9876543210"), &options)
            .invoke(&mut con)
            .unwrap();
        assert!(matches!(
            fifo.read_acquire(reply),
            Ok(Attempt::Queued { .. })
        ));
        assert_eq!(line(&fifo, &mut con), [OWNER]);
    }

    /// A waiter whose record lapsed comes back before it reached the head: it keeps its one
    /// entry. Served once, it has no entry left that would put it ahead of a waiter who waited
    /// all along when it waits again.
    #[test]
    fn a_waiter_whose_record_lapsed_does_not_jump_the_line_after_it_was_served() {
        let (_server, mut con) = server();
        let fifo: Fifo = held(&mut con, "lapsed");
        let (a, b, c) = (OWNER, OTHER, "6b1f1f5e-0000-4000-8000-000000000003:1");
        assert!(busy(look_as(&fifo, &mut con, a, "a1")));
        assert!(busy(look_as(&fifo, &mut con, b, "b")));
        // A stalls past the queue timeout: its record lapses (deleted here, as its TTL would).
        let _: () = redis::cmd("DEL")
            .arg(keys::fifo_waiter_record("lapsed", a))
            .query(&mut con)
            .unwrap();
        assert!(busy(look_as(&fifo, &mut con, a, "a1")));
        assert!(busy(look_as(&fifo, &mut con, c, "c")));
        free(&fifo, &mut con);
        assert_eq!(look_as(&fifo, &mut con, a, "a1"), ACQUIRED);
        release_as(&fifo, &mut con, a, "a1");
        assert_eq!(look_as(&fifo, &mut con, b, "b"), ACQUIRED);
        // A waits again while B holds; C has waited all along and is served first.
        assert!(busy(look_as(&fifo, &mut con, a, "a2")));
        release_as(&fifo, &mut con, b, "b");
        assert!(
            busy(look_as(&fifo, &mut con, a, "a2")),
            "A came back ahead of C on a stale entry"
        );
        assert_eq!(look_as(&fifo, &mut con, c, "c"), ACQUIRED);
    }
}
