//! The expirable semaphore handle (`Client::expirable_semaphore`): permits with an id and a
//! lease (Redisson RPermitExpirableSemaphore layout).

use crate::settings::options::AcquireOptions;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::engine::context::query;
use crate::engine::context::ClientInner;
use crate::engine::LockCore;
use crate::foundation::error::{Error, ErrorKind, Result};
use crate::foundation::maps::{remove_shrinking, Map};
use crate::foundation::runtime::on_runtime;
use crate::handles::semaphore::Semaphore;
use crate::kinds::expirable_semaphore::Permit;
use crate::metrics::{kind as metric_kind, LockStats};
use crate::settings::options::validate_permit_id;

/// How many lost permits a handle remembers, so that their release reports them lost: its
/// memory follows the permits of now, never all those of the past.
const LOST_REMEMBERED: usize = 1024;

/// A semaphore whose permits each have an id and a lease: a permit whose holder dies comes back
/// when its lease runs out. Without a lease a permit is renewed by the watchdog while its
/// holder's client lives, like a lock (Redisson's permits have a fixed lease or none at all).
/// A permit is released by its id, from this handle or any other client. A permit whose
/// lease ran out (by this client's clock, from when the request that took it was sent), or
/// that the watchdog found gone, leaves the handle at once. Cheap to clone: clones share the
/// permits this handle holds; dropping the last clone releases them in the background.
#[derive(Clone)]
pub struct ExpirableSemaphore {
    inner: Arc<Inner>,
}

struct Inner {
    client: Arc<ClientInner>,
    name: String,
    kind: Arc<Permit>,
    stats: Arc<LockStats>,
    /// The counter's operations, shared with the plain semaphore.
    counter: Semaphore,
    /// The permits this handle holds, by id: each leaves when released or lost. Locked
    /// before `lost` when both are.
    held: Mutex<Map<String, Arc<LockCore>>>,
    /// This handle's permits that were lost and not released since, oldest first, with why:
    /// their release reports it. The latest [`LOST_REMEMBERED`] only; an older one's release
    /// finds nobody holding it.
    lost: Mutex<VecDeque<(String, Error)>>,
}

impl Inner {
    fn held(&self) -> MutexGuard<'_, Map<String, Arc<LockCore>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lost(&self) -> MutexGuard<'_, VecDeque<(String, Error)>> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remember_lost(&self, lost: &mut VecDeque<(String, Error)>, id: String, error: Error) {
        if lost.len() == LOST_REMEMBERED {
            lost.pop_front();
        }
        lost.push_back((id, error));
    }

    /// The lost hook of permit `id` (hold `core_id`): the upkeep task found its lease over, or
    /// the watchdog found it gone, or the client was closed. It leaves the handle, remembered
    /// as lost. Runs on the thread that found it lost: takes two short locks, never waits.
    fn permit_lost(&self, id: &str, core_id: u64, error: &Error) {
        let mut held = self.held();
        // Not there: being released (that release reports the loss), or not yet kept (`keep`
        // sees it lost).
        if held.get(id).is_none_or(|core| core.id != core_id) {
            return;
        }
        let core = remove_shrinking(&mut held, id);
        let mut lost = self.lost();
        self.remember_lost(&mut lost, id.to_owned(), error.clone());
        drop(lost);
        drop(held);
        // Not the last reference (whoever marked it lost has one), so this drop does no work.
        drop(core);
    }

    /// Keeps permit `id`, acquired (or not released after all) by `core`: in the held set, or
    /// remembered as lost when it was lost before it got here (its hook found nothing to drop).
    fn keep(&self, id: String, core: Arc<LockCore>) {
        let mut held = self.held();
        // Under `held`: a loss marked after this check finds the permit there.
        if !core.is_lost() {
            held.insert(id, core);
            return;
        }
        let error = Error::lock_lost(format!(
            "permit '{id}' of semaphore '{}' was lost as soon as it was acquired: its lease \
             ran out, another client released it, or the client was closed",
            self.name
        ));
        let mut lost = self.lost();
        self.remember_lost(&mut lost, id, error);
    }

    /// Forgets lost permit `id`, returning why it was lost; `None` when not remembered.
    fn take_lost(&self, lost: &mut VecDeque<(String, Error)>, id: &str) -> Option<Error> {
        let at = lost.iter().position(|(lost_id, _)| lost_id == id)?;
        let (_, error) = lost.remove(at)?;
        if lost.is_empty() {
            lost.shrink_to_fit();
        }
        Some(error)
    }
}

impl std::fmt::Debug for ExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpirableSemaphore")
            .field("name", &self.inner.name)
            .field("held", &self.held_permits())
            .finish()
    }
}

impl ExpirableSemaphore {
    pub(crate) fn new(client: Arc<ClientInner>, name: &str) -> ExpirableSemaphore {
        ExpirableSemaphore {
            inner: Arc::new(Inner {
                stats: client.metrics.lock(name, metric_kind::EXPIRABLE_SEMAPHORE),
                counter: Semaphore::new(client.clone(), name),
                kind: Arc::new(Permit::new(name, &client.key_of(name), client.publish)),
                client,
                name: name.to_owned(),
                held: Mutex::new(Map::default()),
                lost: Mutex::new(VecDeque::new()),
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The ids of the permits this handle holds. A permit leaves when released, or as soon as
    /// this handle learns it was lost: its fixed lease ran out (by this client's clock), the
    /// watchdog found it gone, or the client was closed. No I/O.
    pub fn held_permits(&self) -> Vec<String> {
        self.inner.held().keys().cloned().collect()
    }

    /// Sets the number of permits if it was never set (no key); true when set.
    pub async fn try_set_permits(&self, permits: i64) -> Result<bool> {
        self.inner.counter.try_set_permits(permits).await
    }

    /// Adds permits (a negative number takes some away); wakes waiters.
    pub async fn add_permits(&self, permits: i64) -> Result<()> {
        self.inner.counter.add_permits(permits).await
    }

    /// The permits available now, after permits whose lease ran out came back.
    pub async fn available_permits(&self) -> Result<i64> {
        let what = format!("count the permits of semaphore '{}'", self.inner.name);
        query(&self.inner.client, what, self.inner.kind.available()).await
    }

    /// Takes one permit, waiting for it up to `options.wait` (`None`: without bound, zero: one
    /// attempt), and returns its id (32 hex characters), or `None` when the wait ran out.
    /// `options.lease`: `None` renews the permit by the watchdog while this client lives; a
    /// duration is a fixed lease, after which the permit comes back by itself. Dropping the
    /// future, or an attempt whose reply was lost, takes nothing.
    pub async fn acquire(&self, options: AcquireOptions) -> Result<Option<String>> {
        let AcquireOptions { wait, lease } = options;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let kind: Arc<Permit> = self.inner.kind.clone();
        let core = Arc::new(LockCore::with_owner(
            self.inner.client.clone(),
            kind,
            id.clone(),
            self.inner.stats.clone(),
        ));
        // Weak: the handle owns its permits, not the other way round.
        let (semaphore, permit, core_id) = (Arc::downgrade(&self.inner), id.clone(), core.id);
        core.set_lost_hook(Box::new(move |error| {
            if let Some(inner) = Weak::upgrade(&semaphore) {
                inner.permit_lost(&permit, core_id, error);
            }
        }));
        if !core.acquire(wait, lease, None).await? {
            return Ok(None);
        }
        self.inner.keep(id.clone(), core);
        Ok(Some(id))
    }

    /// Releases permit `permit_id`. [`ErrorKind::LockLost`](crate::ErrorKind::LockLost) when it was this handle's and was lost
    /// (its lease ran out: it is back in the semaphore all the same; or another client released
    /// it), once; [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when nobody holds it (released already, expired, or never
    /// acquired). The lost permits remembered are this handle's latest 1024.
    pub async fn release(&self, permit_id: &str) -> Result<()> {
        validate_permit_id(permit_id)?;
        let this = self.clone();
        let id = permit_id.to_ascii_lowercase();
        let what = format!("release a permit of semaphore '{}'", self.inner.name);
        on_runtime(&what, async move { this.release_on_runtime(id).await }).await
    }

    async fn release_on_runtime(&self, id: String) -> Result<()> {
        let held = {
            let mut held = self.inner.held();
            match remove_shrinking(&mut held, &id) {
                Some(core) => Ok(core),
                None => Err(self.inner.take_lost(&mut self.inner.lost(), &id)),
            }
        };
        match held {
            Ok(core) => {
                let released = core.release().await;
                if released
                    .as_ref()
                    .is_err_and(|err| matches!(err.kind(), ErrorKind::WrongType | ErrorKind::Redis))
                {
                    // Not released and not lost: the permit is still this handle's.
                    self.inner.keep(id, core);
                }
                return released;
            }
            // Lost while this handle held it: told once, as a lock's release tells it.
            Err(Some(lost)) => return Err(lost),
            Err(None) => {}
        }
        let core = Arc::new(LockCore::with_owner(
            self.inner.client.clone(),
            self.inner.kind.clone(),
            id.clone(),
            self.inner.stats.clone(),
        ));
        match core.release_unheld().await? {
            Some(1) => Ok(()),
            _ => Err(Error::not_held(format!(
                "permit '{id}' of semaphore '{}' is not held: it was released already, its \
                 lease ran out, or it was never acquired",
                self.inner.name
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::{Client, ErrorKind};

    /// Permits whose lease ran out leave nothing behind but their ids (to report them lost),
    /// and no more than the latest `LOST_REMEMBERED` of those: their engine handles are
    /// freed, and neither the handle's table nor the client's registry or upkeep table keeps
    /// an entry or the room for one.
    #[tokio::test]
    async fn expired_permits_leave_nothing_behind() {
        let permits = LOST_REMEMBERED + 24;
        let server = polylock_testkit::RedisServer::start();
        let client = Client::connect(&server.url()).await.unwrap();
        let semaphore = client.expirable_semaphore("xsem:room").unwrap();
        assert!(semaphore.try_set_permits(permits as i64).await.unwrap());
        let mut ids = Vec::with_capacity(permits);
        let mut cores: Vec<Weak<LockCore>> = Vec::with_capacity(permits);
        for _ in 0..permits {
            let options = AcquireOptions::new()
                .no_wait()
                .lease(Duration::from_millis(300));
            let id = semaphore.acquire(options).await.unwrap().unwrap();
            // Taken now (it cannot have expired yet: the lease runs for 300 ms from now).
            if let Some(core) = semaphore.inner.held().get(&id) {
                cores.push(Arc::downgrade(core));
            }
            ids.push(id);
        }
        assert!(!cores.is_empty());
        let until = Instant::now() + Duration::from_secs(5);
        while !semaphore.held_permits().is_empty() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(semaphore.held_permits(), Vec::<String>::new());
        assert_eq!(semaphore.inner.held().capacity(), 0, "the handle's table");
        assert!(
            cores.iter().all(|core| core.upgrade().is_none()),
            "engine handles of expired permits are still alive"
        );
        assert_eq!(client.inner.tracked_holds(), 0, "the client's registry");
        assert_eq!(client.inner.upkeep.table_room(), 0, "the upkeep table");
        let remembered: Vec<String> = semaphore
            .inner
            .lost()
            .iter()
            .map(|(id, _)| id.clone())
            .collect();
        assert_eq!(remembered.len(), LOST_REMEMBERED);
        // A remembered one is reported lost; one forgotten is held by nobody.
        let err = semaphore.release(&remembered[0]).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
        let forgotten = ids.iter().find(|id| !remembered.contains(id)).unwrap();
        let err = semaphore.release(forgotten).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
        for id in &remembered[1..] {
            let err = semaphore.release(id).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::LockLost, "{err}");
        }
        assert_eq!(
            semaphore.inner.lost().capacity(),
            0,
            "the lost permits' memory"
        );
        // A script gives back at most 1,000 expired permits per call (`reclaim` in the
        // semaphore's prelude bounds its time), so all of these come back over two calls.
        let until = Instant::now() + Duration::from_secs(5);
        let mut available = semaphore.available_permits().await.unwrap();
        while available != permits as i64 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
            available = semaphore.available_permits().await.unwrap();
        }
        assert_eq!(available, permits as i64);
    }
}
