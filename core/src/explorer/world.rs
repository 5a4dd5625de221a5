//! One explored system: the server, the simulated clients, the messages in flight, and the
//! steps that move it (a client's next engine action, a message's fate, time, and faults).

use std::fmt;

use redis::Value;

use super::model::{ClientSpec, Phase, SimClient, LOCK};
use super::server::Server;
use crate::connection::Publish;
use crate::kinds::Attempt;

/// How the deployment counts a `PUBLISH`'s receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One server, or a cluster with sharded pub/sub: every listener is counted.
    Exact,
    /// A cluster with broadcast pub/sub: only the lock node's listeners are counted, yet the
    /// message reaches every node's.
    Broadcast,
}

impl Mode {
    pub(crate) fn publish(self) -> Publish {
        Publish::Explored {
            exact: self == Mode::Exact,
        }
    }
}

/// A message published to one listening client, not yet delivered.
#[derive(Debug, Clone, Hash)]
pub(crate) struct InFlight {
    pub to: usize,
    pub channel: String,
    pub payload: String,
}

/// One step of an explored run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    /// An acquire attempt (or a retry of the same request, or the look after a wake-up);
    /// `reply_lost`: the script ran but its reply never came.
    Look {
        client: usize,
        reply_lost: bool,
    },
    /// Subscribe after a busy reply, then the nothing-missed check.
    Subscribe {
        client: usize,
    },
    /// An attempt's outcome is unknown and the caller gives up: the call ends, and the
    /// resolver will undo the request (`resolve_unknown`).
    GiveUp {
        client: usize,
    },
    /// The resolver's undo of a request whose outcome is unknown (a lost reply, a failed
    /// leave) runs, whenever the server answers again.
    Undo {
        client: usize,
    },
    /// A waiter gives up (its wait ran out): leave the queue; `lost`: the script never ran.
    Leave {
        client: usize,
        lost: bool,
    },
    Renew {
        client: usize,
    },
    Release {
        client: usize,
    },
    /// The oldest message in flight to `client` arrives, is lost, or arrives and stays in
    /// flight to arrive again.
    Deliver {
        client: usize,
        fate: Fate,
    },
    /// The pub/sub connection of a sleeping `client` drops: its messages in flight are lost,
    /// and it looks again (as after any reconnect), subscribing after that look.
    Cut {
        client: usize,
    },
    /// Time moves for everyone.
    Advance {
        ms: u64,
    },
    /// Time moves while `client`'s machine is suspended: its monotonic clock stands still.
    Suspend {
        client: usize,
        ms: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Fate {
    Arrives,
    Lost,
    Duplicated,
}

impl Step {
    pub(crate) fn is_fault(self) -> bool {
        matches!(
            self,
            Step::Look {
                reply_lost: true,
                ..
            } | Step::Leave { lost: true, .. }
                | Step::Deliver {
                    fate: Fate::Lost | Fate::Duplicated,
                    ..
                }
                | Step::Cut { .. }
                | Step::Suspend { .. }
        )
    }

    /// Faults after which no waiter can count on being woken by a message.
    pub(crate) fn loses_wakeups(self) -> bool {
        matches!(
            self,
            Step::Deliver {
                fate: Fate::Lost,
                ..
            } | Step::Cut { .. }
                | Step::Leave { lost: true, .. }
                | Step::Look {
                    reply_lost: true,
                    ..
                }
                | Step::Suspend { .. }
        )
    }

    pub(crate) fn client(self) -> Option<usize> {
        match self {
            Step::Look { client, .. }
            | Step::Subscribe { client }
            | Step::GiveUp { client }
            | Step::Undo { client }
            | Step::Leave { client, .. }
            | Step::Renew { client }
            | Step::Release { client }
            | Step::Cut { client } => Some(client),
            _ => None,
        }
    }
}

/// What the explorer may do besides the clients' own steps.
#[derive(Debug, Clone)]
pub(crate) struct Faults {
    pub reply_lost: bool,
    pub leave_lost: bool,
    pub message_lost: bool,
    pub duplicated: bool,
    pub cut: bool,
    /// Suspensions of this long (a machine paused, its clock with it).
    pub suspend_ms: Vec<u64>,
    /// Time moves by these.
    pub advance_ms: Vec<u64>,
    /// Clients may renew (the watchdog; at any time while held: it runs every third).
    pub renew: bool,
}

pub(crate) struct World {
    pub mode: Mode,
    pub clients: Vec<SimClient>,
    pub in_flight: Vec<InFlight>,
    /// What happened, step by step, for the report.
    pub log: Vec<String>,
    pub wakeups_lost: bool,
}

impl World {
    /// A fresh system on a server just reset (semaphores get their one permit).
    pub(crate) fn new(server: &mut Server, mode: Mode, specs: &[ClientSpec]) -> World {
        server.reset();
        let mut clients: Vec<SimClient> = specs
            .iter()
            .enumerate()
            .map(|(index, spec)| SimClient::new(index, spec.clone(), mode.publish()))
            .collect();
        for client in &mut clients {
            client.begin_call();
        }
        if specs
            .iter()
            .any(|spec| spec.side == super::model::Side::Permit)
        {
            let _: () = redis::cmd("SET")
                .arg(LOCK)
                .arg(1)
                .query(server.connection())
                .unwrap();
        }
        World {
            mode,
            clients,
            in_flight: Vec::new(),
            log: Vec::new(),
            wakeups_lost: false,
        }
    }

    /// Every step possible now.
    pub(crate) fn enabled(&self, faults: &Faults, now_ms: u64) -> Vec<Step> {
        let mut steps = Vec::new();
        for client in &self.clients {
            let index = client.index;
            let local = client.local(now_ms);
            match client.phase {
                Phase::Looking => {
                    steps.push(Step::Look {
                        client: index,
                        reply_lost: false,
                    });
                    if faults.reply_lost {
                        steps.push(Step::Look {
                            client: index,
                            reply_lost: true,
                        });
                    }
                }
                Phase::Subscribing => steps.push(Step::Subscribe { client: index }),
                Phase::Sleeping => {
                    if client.woken || local >= client.wakes_at_local {
                        steps.push(Step::Look {
                            client: index,
                            reply_lost: false,
                        });
                    }
                    steps.push(Step::Leave {
                        client: index,
                        lost: false,
                    });
                    if faults.leave_lost {
                        steps.push(Step::Leave {
                            client: index,
                            lost: true,
                        });
                    }
                }
                Phase::Unknown => {
                    steps.push(Step::Look {
                        client: index,
                        reply_lost: false,
                    });
                    steps.push(Step::GiveUp { client: index });
                }
                Phase::Holding => {
                    steps.push(Step::Release { client: index });
                    let watchdog = client.held.as_ref().is_some_and(|held| held.watchdog);
                    if faults.renew && watchdog {
                        steps.push(Step::Renew { client: index });
                    }
                }
                Phase::Done => {}
            }
            if !client.pending_undo.is_empty() {
                steps.push(Step::Undo { client: index });
            }
            if self.in_flight.iter().any(|message| message.to == index) {
                steps.push(Step::Deliver {
                    client: index,
                    fate: Fate::Arrives,
                });
                if faults.message_lost {
                    steps.push(Step::Deliver {
                        client: index,
                        fate: Fate::Lost,
                    });
                }
                if faults.duplicated {
                    steps.push(Step::Deliver {
                        client: index,
                        fate: Fate::Duplicated,
                    });
                }
            }
            if faults.cut && client.listening && client.phase == Phase::Sleeping {
                steps.push(Step::Cut { client: index });
            }
            if client.phase != Phase::Done {
                for &ms in &faults.suspend_ms {
                    steps.push(Step::Suspend { client: index, ms });
                }
            }
        }
        if self
            .clients
            .iter()
            .any(|client| client.phase != Phase::Done)
        {
            for &ms in &faults.advance_ms {
                steps.push(Step::Advance { ms });
            }
        }
        steps
    }

    /// Whether nothing is left to do but wait: every client done or asleep with no message
    /// due, nothing in flight.
    pub(crate) fn quiescent(&self, now_ms: u64) -> bool {
        self.in_flight.is_empty()
            && self
                .clients
                .iter()
                .all(|client| client.pending_undo.is_empty())
            && self.clients.iter().all(|client| match client.phase {
                Phase::Done => true,
                Phase::Sleeping => !client.woken && client.local(now_ms) < client.wakes_at_local,
                _ => false,
            })
    }

    pub(crate) fn apply(&mut self, server: &mut Server, step: Step) {
        self.wakeups_lost |= step.loses_wakeups();
        let now = server.now_ms();
        let line = match step {
            Step::Look { client, reply_lost } => self.look(server, client, reply_lost),
            Step::Subscribe { client } => self.subscribe(server, client),
            Step::GiveUp { client } => {
                let sim = &mut self.clients[client];
                let request = sim.request.clone();
                sim.pending_undo.push(request);
                sim.end_call();
                "gives up; the resolver will undo the request".to_owned()
            }
            Step::Undo { client } => {
                let call = self.clients[client].undo_call().expect("a request to undo");
                let undone = self.run(server, &call);
                self.clients[client].pending_undo.remove(0);
                format!("undo -> {undone:?}")
            }
            Step::Leave { client, lost } => {
                let has_place = self.clients[client].has_place;
                let request = self.clients[client].request.clone();
                let reply = match self.clients[client].leave_call() {
                    Some(call) if has_place && !lost => format!("{:?}", self.run(server, &call)),
                    Some(_) if has_place => {
                        // `acquire_task`: a leave the server did not answer is undone.
                        self.clients[client].pending_undo.push(request);
                        "failed: never ran; the resolver will undo the request".to_owned()
                    }
                    _ => "no place to leave".to_owned(),
                };
                self.clients[client].end_call();
                format!("gives up, leaves -> {reply}")
            }
            Step::Renew { client } => {
                let call = self.clients[client].renewal_call(self.mode.publish());
                let sent = self.clients[client].local(now);
                let reply = self.run(server, &call);
                let renewed =
                    matches!(&reply, Value::Array(items) if items.first() == Some(&Value::Int(1)));
                if let Some(held) = self.clients[client].held.as_mut() {
                    if renewed && sent < held.ends_local {
                        held.ends_local = sent + held.lease_ms as i64;
                    }
                }
                format!("renews -> {}", if renewed { "renewed" } else { "gone" })
            }
            Step::Release { client } => {
                let reply = match self.clients[client].release_call() {
                    Some(call) => format!("{:?}", self.run(server, &call)),
                    None => "nothing held".to_owned(),
                };
                let sim = &mut self.clients[client];
                if let Some(held) = sim.held.as_mut() {
                    held.levels.pop();
                    if held.levels.is_empty() {
                        sim.held = None;
                    }
                }
                if sim.held.is_none() {
                    sim.next_call();
                }
                format!("releases -> {reply}")
            }
            Step::Deliver { client, fate } => {
                let position = self
                    .in_flight
                    .iter()
                    .position(|message| message.to == client)
                    .expect("a message in flight");
                let message = self.in_flight[position].clone();
                match fate {
                    Fate::Lost => {
                        self.in_flight.remove(position);
                    }
                    Fate::Arrives => {
                        self.in_flight.remove(position);
                        self.clients[client].deliver(&message.payload);
                    }
                    Fate::Duplicated => self.clients[client].deliver(&message.payload),
                }
                format!("{fate:?}: {} on {}", message.payload, message.channel)
            }
            Step::Cut { client } => {
                self.in_flight.retain(|message| message.to != client);
                let sim = &mut self.clients[client];
                sim.listening = false;
                // Every waiter looks again after a reconnect (and subscribes again after it).
                sim.phase = Phase::Looking;
                "pub/sub connection cut".to_owned()
            }
            Step::Advance { ms } => {
                server.set_time(now + ms);
                format!("time +{ms} ms")
            }
            Step::Suspend { client, ms } => {
                server.set_time(now + ms);
                self.clients[client].clock_offset_ms -= ms as i64;
                format!("suspended {ms} ms (its clock stands still)")
            }
        };
        let who = step
            .client()
            .or(match step {
                Step::Deliver { client, .. } | Step::Suspend { client, .. } => Some(client),
                _ => None,
            })
            .map_or("*".to_owned(), |client| format!("c{client}"));
        self.log.push(format!("t={now:>6} {who}: {line}"));
    }

    /// The engine's look: the grant check first (`granted`), else an attempt.
    fn look(&mut self, server: &mut Server, index: usize, reply_lost: bool) -> String {
        let now = server.now_ms();
        if self.clients[index].check_granted(now) {
            let ends = self.clients[index].held.as_ref().unwrap().ends_local;
            return format!("granted by message, holds until local {ends}");
        }
        let sent = self.clients[index].local(now);
        let call = self.clients[index].acquire_call(sent);
        let sim = &self.clients[index];
        let request = sim.request.clone();
        let reply = self.run(server, &call);
        let step_number = self.log.len();
        let sim = &mut self.clients[index];
        sim.first_attempt_step.get_or_insert(step_number);
        // A fair waiter that did not look for a queue timeout was skipped as dead (its liveness
        // record lapsed, `kinds/fair/prelude.lua`): this look queues it anew, at the back.
        let queue_timeout = super::model::options().fair_queue_timeout.as_millis() as u64;
        if sim.waiting_since_step.is_some() && now >= sim.last_look_ms + queue_timeout {
            sim.waiting_since = None;
            sim.waiting_since_step = None;
        }
        sim.woken = false;
        sim.last_look_ms = now;
        if reply_lost {
            sim.phase = Phase::Unknown;
            return format!("attempt {request} ran, reply lost ({reply:?})");
        }
        let attempt = sim
            .kind
            .read_acquire(reply.clone())
            .expect("an acquire reply");
        sim.on_attempt(attempt, sent, now);
        if matches!(attempt, Attempt::Busy(_) | Attempt::Queued { .. }) {
            sim.waiting_since_step.get_or_insert(step_number);
        }
        format!("attempt {request} -> {attempt:?}")
    }

    /// `acquire_loop`: subscribe, then sleep only if nothing was missed, else look again.
    fn subscribe(&mut self, server: &mut Server, index: usize) -> String {
        self.clients[index].listening = true;
        self.clients[index].woken = false;
        let missed = match self.clients[index]
            .kind
            .nothing_missed(&self.clients[index].owner)
        {
            Some(pipe) => {
                let replies: Vec<Value> = pipe.query(server.connection()).unwrap();
                replies
                    .iter()
                    .any(|reply| matches!(reply, Value::Nil | Value::Int(0)))
            }
            None => true,
        };
        let sim = &mut self.clients[index];
        sim.phase = if missed {
            Phase::Looking
        } else {
            Phase::Sleeping
        };
        format!(
            "subscribes, {}",
            if missed {
                "may have missed a release: looks again"
            } else {
                "missed nothing: sleeps"
            }
        )
    }

    /// Runs a script with the listener counts of now, then routes what it published.
    fn run(&mut self, server: &mut Server, call: &redis::ScriptInvocation<'static>) -> Value {
        self.write_listener_counts(server);
        let reply: Value = call.invoke(server.connection()).unwrap_or_else(|err| {
            panic!("script failed: {err}\n{}", self.log.join("\n"));
        });
        let published = server.take_published();
        for (channel, payload) in &published {
            for client in &self.clients {
                if client.listening && client.channels().contains(channel) {
                    self.in_flight.push(InFlight {
                        to: client.index,
                        channel: channel.clone(),
                        payload: payload.clone(),
                    });
                }
            }
        }
        reply
    }

    /// What a `PUBLISH` on each channel answers now (see [`Mode`]).
    fn write_listener_counts(&self, server: &mut Server) {
        let mut counts: std::collections::BTreeMap<String, i64> = Default::default();
        for client in &self.clients {
            if !client.listening || (self.mode == Mode::Broadcast && client.spec.other_node) {
                continue;
            }
            for channel in client.channels() {
                *counts.entry(channel).or_default() += 1;
            }
        }
        server.set_listener_counts(counts);
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.log {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}
