//! The properties checked after every step, and at quiescence.

use super::model::{options, Phase, Side, LOCK};
use super::server::Server;
use super::world::{Step, World};

#[derive(Debug, Clone)]
pub(crate) struct Violation {
    pub property: &'static str,
    pub detail: String,
}

pub(crate) fn violation(property: &'static str, detail: String) -> Option<Violation> {
    Some(Violation { property, detail })
}

/// After every step: exclusion, belief backed by the server, and FIFO for the fair lock.
pub(crate) fn after_step(world: &World, server: &mut Server, step: Step) -> Option<Violation> {
    let now = server.now_ms();
    let believers: Vec<_> = world
        .clients
        .iter()
        .filter(|client| client.believes_held(now))
        .collect();
    // Never two exclusive holders (a permit counts as one of the semaphore's one), nor a
    // writer beside a reader of another owner.
    let exclusive: Vec<_> = believers
        .iter()
        .filter(|client| client.spec.side != Side::Read)
        .collect();
    if exclusive.len() > 1 {
        return violation(
            "exclusion",
            format!(
                "{} each believe they hold the lock",
                exclusive
                    .iter()
                    .map(|c| c.owner.as_str())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        );
    }
    let writer = exclusive
        .iter()
        .find(|client| client.spec.side == Side::Write);
    if let (Some(writer), Some(reader)) = (
        writer,
        believers
            .iter()
            .find(|client| client.spec.side == Side::Read),
    ) {
        return violation(
            "exclusion",
            format!("{} writes while {} reads", writer.owner, reader.owner),
        );
    }
    for client in &believers {
        let Some(field) = client.spec.side.field(&client.owner) else {
            continue;
        };
        let held: bool = redis::cmd("HEXISTS")
            .arg(LOCK)
            .arg(&field)
            .query(server.connection())
            .unwrap();
        if !held {
            return violation(
                "belief is held on the server",
                format!(
                    "{} believes it holds (lease ends at local {}, now local {}) but the lock \
                     hash has no field {field}",
                    client.owner,
                    client.held.as_ref().unwrap().ends_local,
                    client.local(now)
                ),
            );
        }
    }
    fifo(world, now, step)
}

/// Fair and FIFO locks: whoever acquires has waited at least as long as every live waiter still in line.
fn fifo(world: &World, now: u64, step: Step) -> Option<Violation> {
    let index = step.client()?;
    let acquirer = &world.clients[index];
    if !matches!(acquirer.spec.side, Side::Fair | Side::Fifo) || acquirer.phase != Phase::Holding {
        return None;
    }
    let Step::Look { .. } = step else {
        return None;
    };
    let queue_timeout = options().fair_queue_timeout.as_millis() as u64;
    let acquirer_first = acquirer.first_attempt_step;
    for other in &world.clients {
        let waiting = matches!(
            other.phase,
            Phase::Sleeping | Phase::Looking | Phase::Subscribing
        );
        let (Some(other_since), Some(other_step), true) =
            (other.waiting_since, other.waiting_since_step, waiting)
        else {
            continue;
        };
        let live = now.saturating_sub(other.last_look_ms) < queue_timeout;
        // The other was queued before the acquirer's first attempt of this call ran.
        let earlier = acquirer_first.is_none_or(|mine| other_step < mine);
        if other.index != index && live && earlier {
            return violation(
                "FIFO",
                format!(
                    "{} acquired ahead of {}, which waits since t={other_since}",
                    acquirer.owner, other.owner
                ),
            );
        }
    }
    None
}

/// At quiescence (nothing in flight, every client done or asleep): nothing left held by
/// nobody, and no waiter asleep beside a free lock (unless a wake-up was lost to a fault).
pub(crate) fn at_quiescence(world: &World, server: &mut Server) -> Option<Violation> {
    let semaphore = world.clients.iter().any(|c| c.spec.side == Side::Permit);
    let free = |server: &mut Server| -> bool {
        if semaphore {
            let permits: Option<i64> = redis::cmd("GET")
                .arg(LOCK)
                .query(server.connection())
                .unwrap();
            permits.unwrap_or(0) >= 1
        } else {
            let exists: bool = redis::cmd("EXISTS")
                .arg(LOCK)
                .query(server.connection())
                .unwrap();
            !exists
        }
    };
    if world
        .clients
        .iter()
        .all(|client| client.phase == Phase::Done)
    {
        // A grant to a waiter that went away lapses with its window; anything after is orphaned.
        server.set_time(server.now_ms() + 1001);
        if !free(server) {
            let contents: redis::Value = if semaphore {
                redis::cmd("GET")
                    .arg(LOCK)
                    .query(server.connection())
                    .unwrap()
            } else {
                redis::cmd("HGETALL")
                    .arg(LOCK)
                    .query(server.connection())
                    .unwrap()
            };
            let pttl: i64 = redis::cmd("PTTL")
                .arg(LOCK)
                .query(server.connection())
                .unwrap();
            return violation(
                "nothing held by nobody",
                format!(
                    "every client is done, yet the lock is held: {contents:?}, PTTL {pttl} ms: \
                     nobody can take it until then"
                ),
            );
        }
        return None;
    }
    if !world.wakeups_lost && free(server) {
        let asleep: Vec<_> = world
            .clients
            .iter()
            .filter(|client| client.phase == Phase::Sleeping)
            .map(|client| client.owner.as_str())
            .collect();
        return violation(
            "a waiter is woken when the lock is free",
            format!("the lock is free, every message delivered, and {asleep:?} sleep on"),
        );
    }
    None
}
