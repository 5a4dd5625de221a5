//! `Election`, `Leadership`, `ElectionObserver`: the core's leader election for Kotlin and
//! Swift. Kotlin's `Idioms.kt` adds a `Flow` of changes over `ElectionObserver.next`.

use std::sync::Arc;

use polylock::options::wait_from_millis;

use crate::arguments::ms;
use crate::error::LockError;

/// The leader of an election: its announced value, term, lock owner and client name.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Leader {
    pub value: String,
    pub term: i64,
    pub owner: String,
    pub client_name: String,
}

fn leader(leader: Option<polylock::Leader>) -> Option<Leader> {
    leader.map(|leader| Leader {
        value: leader.value,
        term: leader.term,
        owner: leader.owner,
        client_name: leader.client_name,
    })
}

/// A leader election (`client.election(name)`): candidates campaign on the fenced lock `name`,
/// whose token is each leader's term.
#[derive(uniffi::Object)]
pub struct Election {
    pub(crate) inner: polylock::Election,
}

#[uniffi::export]
impl Election {
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Waits until this candidate leads, announcing `value`; `null` when `waitMs` ran out
    /// (`null`: no bound, `0`: one attempt). Cancelling the caller leaves nothing held.
    #[uniffi::method(default(wait_ms = None))]
    pub async fn campaign(
        &self,
        value: String,
        wait_ms: Option<i64>,
    ) -> Result<Option<Arc<Leadership>>, LockError> {
        let wait = wait_from_millis(ms(wait_ms))?;
        let won = self.inner.campaign(&value, wait).await?;
        Ok(won.map(|inner| Arc::new(Leadership { inner })))
    }

    /// The current leader, or `null` when nobody leads (a dead leader is never reported).
    pub async fn leader(&self) -> Result<Option<Leader>, LockError> {
        Ok(leader(self.inner.leader().await?))
    }

    /// Subscribes to the election's changes.
    pub async fn observe(&self) -> Result<Arc<ElectionObserver>, LockError> {
        let inner = self.inner.observe().await?;
        Ok(Arc::new(ElectionObserver { inner }))
    }
}

/// This candidate's term as leader. Closing it (Kotlin `close()`, Swift deinit) without
/// `resign` releases the lock in the background.
#[derive(uniffi::Object)]
pub struct Leadership {
    inner: polylock::Leadership,
}

#[uniffi::export]
impl Leadership {
    /// The term: higher than every earlier leader's (pass it to `fencedSet`).
    pub fn term(&self) -> i64 {
        self.inner.term()
    }

    /// The value this leader announced last.
    pub fn value(&self) -> String {
        self.inner.value()
    }

    pub fn owner(&self) -> String {
        self.inner.owner().to_owned()
    }

    /// Whether this candidate still leads, as far as it knows (no I/O; reads the clock).
    pub fn is_leader(&self) -> bool {
        self.inner.is_leader()
    }

    /// Whether the leadership ended by a lost lease.
    pub fn is_lost(&self) -> bool {
        self.inner.is_lost()
    }

    /// Returns when the leadership ends: its lease lost (no later than it can have ended on
    /// the server) or resigned.
    pub async fn await_lost(&self) {
        self.inner.lost().await
    }

    /// Announces `value` instead; `LockLost` when no longer leading.
    pub async fn proclaim(&self, value: String) -> Result<(), LockError> {
        Ok(self.inner.proclaim(&value).await?)
    }

    /// Steps down; the next candidate is woken. Resigning twice does nothing.
    pub async fn resign(&self) -> Result<(), LockError> {
        Ok(self.inner.resign().await?)
    }
}

/// The changes of an election's leader.
#[derive(uniffi::Object)]
pub struct ElectionObserver {
    inner: polylock::Observer,
}

#[uniffi::export]
impl ElectionObserver {
    /// The leader now on the first call, then each change (`null`: nobody leads).
    pub async fn next(&self) -> Result<Option<Leader>, LockError> {
        Ok(leader(self.inner.next().await?))
    }
}
