//! The native `Election`, `Leadership` and `ElectionObserver`: the core's leader election.
//! `node/lib/election.js` wraps them (an AbortSignal for the end of a leadership, an async
//! iterator for `observe`).

use napi::bindgen_prelude::{Function, Object, Unknown};
use napi::Env;
use napi_derive::napi;
use polylock::options::wait_from_millis;

use crate::args::{number, string, Fields};
use crate::cancellation::{cancellable, Cancellation};
use crate::error::OrThrow;
use crate::hold::lost_callback;
use crate::promise::promise;

/// The leader of an election: its announced value, term, lock owner and client name.
#[napi(object)]
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

/// A leader election (`client.election(name)`).
#[napi]
pub struct Election {
    pub(crate) inner: polylock::Election,
}

#[napi]
impl Election {
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_owned()
    }

    /// Waits until this candidate leads, announcing `value`; resolves `null` when `waitMs`
    /// runs out or `cancellation` fires (then nothing is held).
    #[napi(
        strict,
        ts_args_type = "value: string, options?: { waitMs?: number | null } | null, cancellation?: Cancellation | null",
        ts_return_type = "Promise<Leadership | null>"
    )]
    pub fn campaign<'env>(
        &self,
        env: &'env Env,
        value: Unknown,
        options: Option<Unknown>,
        cancellation: Option<&Cancellation>,
    ) -> napi::Result<Object<'env>> {
        let args = (|| {
            let value = string(value, "value")?;
            let fields = Fields::of(options, "options")?;
            let wait = wait_from_millis(fields.get("waitMs", number)?)?;
            Ok((value, wait))
        })();
        let (value, wait) = args.or_throw(env)?;
        let election = self.inner.clone();
        let campaign = async move {
            let won = election.campaign(&value, wait).await?;
            Ok(won.map(|inner| Leadership { inner }))
        };
        promise(env, cancellable(cancellation, None, campaign))
    }

    /// The current leader, or `null` when nobody leads.
    #[napi(ts_return_type = "Promise<Leader | null>")]
    pub fn leader<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let election = self.inner.clone();
        promise(env, async move { election.leader().await.map(leader) })
    }

    /// Subscribes to the election's changes.
    #[napi(ts_return_type = "Promise<ElectionObserver>")]
    pub fn observe<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let election = self.inner.clone();
        promise(env, async move {
            let inner = election.observe().await?;
            Ok(ElectionObserver { inner })
        })
    }
}

/// This candidate's term as leader.
#[napi]
pub struct Leadership {
    inner: polylock::Leadership,
}

#[napi]
impl Leadership {
    #[napi(getter)]
    pub fn term(&self) -> i64 {
        self.inner.term()
    }

    #[napi(getter)]
    pub fn value(&self) -> String {
        self.inner.value()
    }

    #[napi(getter)]
    pub fn owner(&self) -> String {
        self.inner.owner().to_owned()
    }

    /// Whether this candidate still leads, as far as it knows (no I/O; reads the clock).
    #[napi]
    pub fn is_leader(&self) -> bool {
        self.inner.is_leader()
    }

    /// Whether the leadership ended by a lost lease.
    #[napi]
    pub fn is_lost(&self) -> bool {
        self.inner.is_lost()
    }

    /// Calls `callback` with an `ERR_LOCK_LOST` error when the lease is lost.
    #[napi(ts_args_type = "callback: (error: Error) => void")]
    pub fn on_lost(&self, callback: Function<(), ()>) -> napi::Result<()> {
        self.inner.on_lost(lost_callback(callback)?);
        Ok(())
    }

    /// Announces `value` instead; rejects with `ERR_LOCK_LOST` when no longer leading.
    #[napi(ts_args_type = "value: string", ts_return_type = "Promise<void>")]
    pub fn proclaim<'env>(&self, env: &'env Env, value: Unknown) -> napi::Result<Object<'env>> {
        let value = string(value, "value").or_throw(env)?;
        let leadership = self.inner.clone();
        promise(env, async move { leadership.proclaim(&value).await })
    }

    /// Steps down; the next candidate is woken.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn resign<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let leadership = self.inner.clone();
        promise(env, async move { leadership.resign().await })
    }
}

/// The changes of an election's leader.
#[napi]
pub struct ElectionObserver {
    inner: polylock::Observer,
}

#[napi]
impl ElectionObserver {
    /// The leader now on the first call, then each change (`null`: nobody leads).
    #[napi(ts_return_type = "Promise<Leader | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let observer = self.inner.clone();
        promise(env, async move { observer.next().await.map(leader) })
    }
}
