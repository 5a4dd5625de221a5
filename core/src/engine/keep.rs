//! Leaving a hold to its TTL: the job lock's `at_least` keeps a finished job's lock held by
//! nobody in particular until a given moment, instead of releasing it.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::{run_idempotent, LockCore};
use crate::foundation::error::Result;

impl LockCore {
    /// Sets the key's TTL to `ttl` (shortening or extending it) if this handle's owner still
    /// holds it, with the kind's owner-checked renewal script, then lets go of the hold here
    /// without releasing it: nothing renews, expires or releases it any more, and the key lives
    /// out its TTL. False, with nothing written, when the key is no longer this owner's (its
    /// lease ran out; another owner may hold it now): the hold ends as lost. An error when the
    /// server could not be reached: the hold is let go all the same (the key keeps its lease).
    pub(crate) async fn leave_held_for(self: &Arc<Self>, ttl: Duration) -> Result<bool> {
        let renewal = self.kind.renewal(&self.owner);
        // A TTL of 0 would only check (see renew.lua).
        let ttl_ms = (ttl.as_millis() as u64).max(1);
        let mut call = renewal.script.prepare_invoke(self.client.publish);
        call.key(&renewal.key).arg(ttl_ms).arg(&renewal.owner);
        let what = format!("keep {}", self.described());
        let replies = run_idempotent::<Vec<i64>>(&self.client, &what, &call).await;
        let kept = matches!(&replies, Ok(replies) if replies.first() == Some(&1));
        // Let go even when Redis could not be reached: a held key then lives out its lease,
        // which is longer than asked for; a release in the background (what dropping a held
        // handle does) would end it early, before the time it was to be kept.
        let levels = self.let_go();
        for level in levels {
            self.end_level(level, !kept);
        }
        replies.map(|_| kept)
    }
}
