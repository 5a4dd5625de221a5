//! Test only (the protocol explorer): the engine's I/O seam. A client made on it sends every
//! command into a [`Wire`], where it waits until the explorer runs it on the real server and
//! decides its fate (answered, reply lost, run twice), and it listens through a [`Bus`], whose
//! messages the explorer delivers or loses. Everything else (the engine, the kinds,
//! their scripts, the pub/sub hub, the upkeep task) is the production code.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use redis::{Cmd, ConnectionLike, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::{mpsc, oneshot};

/// What a client sent: one command, or the commands of a pipeline it wants replies to.
pub(crate) enum Sent {
    Command(Cmd),
    Pipeline {
        pipeline: Pipeline,
        offset: usize,
        count: usize,
    },
}

/// A request waiting on the wire for the explorer.
pub struct Request {
    /// Unique on its wire, in the order sent.
    pub(crate) id: u64,
    pub(crate) sent: Sent,
    answer: oneshot::Sender<RedisResult<Vec<Value>>>,
}

impl Request {
    /// Runs it on `server` (a pipeline as one packet), as the server would on arrival, except
    /// that a command `stand_in` answers (the explorer's replica: `INFO replication`, `WAIT`)
    /// gets that answer instead of running on `server`.
    pub fn run_answering(
        &self,
        server: &mut redis::Connection,
        stand_in: &dyn Fn(&Cmd) -> Option<Value>,
    ) -> RedisResult<Vec<Value>> {
        match &self.sent {
            Sent::Command(cmd) => match stand_in(cmd) {
                Some(value) => Ok(vec![value]),
                None => server
                    .req_packed_command(&cmd.get_packed_command())
                    .map(|value| vec![value]),
            },
            Sent::Pipeline {
                pipeline,
                offset,
                count,
            } => {
                if pipeline.is_transaction()
                    || !pipeline.cmd_iter().any(|cmd| stand_in(cmd).is_some())
                {
                    return server.req_packed_commands(
                        &pipeline.get_packed_pipeline(),
                        *offset,
                        *count,
                    );
                }
                // One by one, in order, as the server runs a pipeline's commands.
                let mut replies = Vec::new();
                for cmd in pipeline.cmd_iter() {
                    match stand_in(cmd) {
                        Some(value) => replies.push(value),
                        None => {
                            let mut one = redis::pipe();
                            one.add_command(cmd.clone());
                            replies.extend(server.req_packed_commands(
                                &one.get_packed_pipeline(),
                                0,
                                1,
                            )?);
                        }
                    }
                }
                Ok(replies.into_iter().skip(*offset).take(*count).collect())
            }
        }
    }

    /// Whether it is a script call (the rest are the engine's plain commands and pipelines).
    pub fn is_script(&self) -> bool {
        let Sent::Command(cmd) = &self.sent else {
            return false;
        };
        matches!(cmd.args_iter().next(), Some(redis::Arg::Simple(name))
            if name.eq_ignore_ascii_case(b"EVALSHA") || name.eq_ignore_ascii_case(b"EVAL"))
    }

    /// The client gets `reply`.
    pub fn answer(self, reply: RedisResult<Vec<Value>>) {
        let _ = self.answer.send(reply);
    }

    /// The client's connection drops before a reply comes (whether or not it ran).
    pub fn drop_connection(self) {
        self.answer(Err(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )
        .into()));
    }

    /// What it sends, for the explorer's log.
    pub fn describe(&self) -> String {
        let words = |cmd: &Cmd| -> String {
            let mut args = cmd.args_iter().map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => "<cursor>".to_owned(),
            });
            let name = args.next().unwrap_or_default();
            // A script is named by its first KEYS (its SHA says nothing to a reader).
            if name.eq_ignore_ascii_case("EVALSHA") || name.eq_ignore_ascii_case("EVAL") {
                let sha = args.next().unwrap_or_default();
                let count: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(0);
                let keys: Vec<String> = args.by_ref().take(count).collect();
                // Request ids (32 hex characters) among the arguments, by their last 6.
                let requests: Vec<String> = args
                    .filter(|arg| {
                        arg.len() >= 32 && arg[..32].bytes().all(|b| b.is_ascii_hexdigit())
                    })
                    .map(|arg| format!("r..{}", &arg[26..32]))
                    .collect();
                format!(
                    "script {} on {} {}",
                    &sha[..sha.len().min(6)],
                    keys.iter().take(2).cloned().collect::<Vec<_>>().join(" "),
                    requests.join(" ")
                )
            } else if name.eq_ignore_ascii_case("SCRIPT") {
                "SCRIPT LOAD".to_owned()
            } else {
                std::iter::once(name)
                    .chain(args.take(2))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        };
        match &self.sent {
            Sent::Command(cmd) => words(cmd),
            Sent::Pipeline { pipeline, .. } => format!(
                "pipeline [{}]",
                pipeline
                    .cmd_iter()
                    .map(words)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        }
    }
}

/// The requests sent and not yet taken by the explorer.
#[derive(Default)]
pub struct Wire {
    state: Mutex<WireState>,
}

#[derive(Default)]
struct WireState {
    next_id: u64,
    waiting: Vec<Request>,
}

impl Wire {
    fn state(&self) -> MutexGuard<'_, WireState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, sent: Sent) -> oneshot::Receiver<RedisResult<Vec<Value>>> {
        let (answer, reply) = oneshot::channel();
        let mut state = self.state();
        state.next_id += 1;
        let id = state.next_id;
        state.waiting.push(Request { id, sent, answer });
        reply
    }

    /// The ids of the requests waiting, oldest first (a request whose caller gave up stays
    /// until taken: it may still reach the server).
    pub fn waiting(&self) -> Vec<u64> {
        self.state().waiting.iter().map(|r| r.id).collect()
    }

    /// The oldest request waiting (a connection's commands reach the server in order).
    pub fn take_oldest(&self) -> Option<Request> {
        let mut state = self.state();
        (!state.waiting.is_empty()).then(|| state.waiting.remove(0))
    }

    pub(crate) fn command<'a>(&self, cmd: &Cmd) -> RedisFuture<'a, Value> {
        let reply = self.send(Sent::Command(cmd.clone()));
        Box::pin(async move {
            let mut values = reply.await.map_err(|_| gone())??;
            Ok(values.pop().unwrap_or(Value::Nil))
        })
    }

    pub(crate) fn pipeline<'a>(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let reply = self.send(Sent::Pipeline {
            pipeline: pipeline.clone(),
            offset,
            count,
        });
        Box::pin(async move { reply.await.map_err(|_| gone())? })
    }
}

fn gone() -> redis::RedisError {
    std::io::Error::from(std::io::ErrorKind::BrokenPipe).into()
}

/// One client's pub/sub connection as the explorer sees it: the channels it subscribes to, and
/// the inbox of its hub's reader.
#[derive(Default)]
pub struct Bus {
    state: Mutex<BusState>,
}

#[derive(Default)]
struct BusState {
    /// The channels subscribed (a channel subscribed twice is one subscription on a server).
    subscribed: BTreeSet<String>,
    inbox: Option<mpsc::UnboundedSender<(String, Vec<u8>)>>,
}

impl Bus {
    fn state(&self) -> MutexGuard<'_, BusState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The hub connects: messages go to `inbox` from now on.
    pub fn connect(&self, inbox: mpsc::UnboundedSender<(String, Vec<u8>)>) {
        self.state().inbox = Some(inbox);
    }

    pub fn subscribe(&self, channels: &[String], on: bool) {
        let mut state = self.state();
        for channel in channels {
            if on {
                state.subscribed.insert(channel.clone());
            } else {
                state.subscribed.remove(channel);
            }
        }
    }

    pub fn subscribed(&self) -> Vec<String> {
        self.state().subscribed.iter().cloned().collect()
    }

    pub fn listens(&self, channel: &str) -> bool {
        self.state().subscribed.contains(channel)
    }

    /// The connection drops: its subscriptions end with it, and the hub's reader sees its
    /// stream end (the hub then connects again and subscribes anew).
    pub fn cut(&self) {
        let mut state = self.state();
        state.inbox = None;
        state.subscribed.clear();
    }

    /// Delivers a message (as the server does, only on a channel still subscribed).
    pub fn deliver(&self, channel: &str, payload: &[u8]) -> bool {
        let state = self.state();
        match (&state.inbox, state.subscribed.contains(channel)) {
            (Some(inbox), true) => inbox.send((channel.to_owned(), payload.to_vec())).is_ok(),
            _ => false,
        }
    }
}

/// A client's two ends of the seam.
#[derive(Clone, Default)]
pub struct Seam {
    pub wire: Arc<Wire>,
    pub bus: Arc<Bus>,
}
