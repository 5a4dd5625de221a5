//! The pub/sub side of a client: one connection, one subscription per channel shared by all
//! local waiters (reference-counted), resubscribed after a reconnect.
//!
//! The connection is opened with the client and kept open: when it drops, the hub reconnects,
//! wakes every waiter (messages sent meanwhile are lost) and calls the client's reconnect hook
//! (which re-checks every held lock at once: the server may have restarted).
//!
//! SUBSCRIBE and UNSUBSCRIBE go through one control task in order, so an unsubscribe of a
//! channel whose last waiter left can never overtake the subscribe of the next waiter.
//! `shutdown` ends the control task and the connection.
//!
//! Where the connection goes depends on the deployment ([`Source`]): one server, the primary
//! Sentinel names now (the hub reconnects when it changes), or a Redis Cluster, where waiters
//! subscribe with SSUBSCRIBE on Redis 7+ (sharded pub/sub, as Redisson does there) through the
//! `redis` crate's cluster client, which routes each channel to the node serving its slot and
//! resubscribes after a reconnect or a new slot map. A slot moved to another node makes the
//! server end the subscriptions of its channels (a `sunsubscribe` push): the hub subscribes
//! them again, where the slot lives now, and wakes their waiters to look.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use redis::cluster_async::ClusterConnection;
use redis::{ConnectionInfo, PushInfo, PushKind, Value};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use crate::connection::sentinel::Sentinel;
use crate::error::{Error, Result};
use crate::shrinking::remove_shrinking;

/// Payload of an unlock message that frees the lock for one waiter.
const UNLOCKED: &[u8] = b"0";
/// Payload of a read-unlock message that frees it for every waiter.
const READ_UNLOCKED: &[u8] = b"1";
/// Payload of a polylock release that told its next polylock waiter directly: Redisson reads it
/// as 0 (wake one waiter); polylock's waiters leave it to the one told.
const TOLD_ELSEWHERE: &[u8] = b"00";
/// Prefix of a message granting the lock to a waiter, on its own channel:
/// `g:<request>:<look>` (the waiter's look whose grant entry the release read).
const GRANTED: &[u8] = b"g:";
/// Delay before the next attempt to re-establish a broken pub/sub connection.
const RECONNECT_DELAY: Duration = Duration::from_millis(200);

/// Called after the pub/sub connection came back.
pub(crate) type ReconnectHook = Box<dyn Fn() + Send + Sync>;

/// The wake-ups of one channel, and how many messages it has had (a waiter that looked
/// before a message and sleeps after it does not sleep: see [`Subscription::wait`]).
#[derive(Default)]
struct Wakeups {
    notify: Notify,
    messages: AtomicU64,
    /// Releases that told a waiter elsewhere (`00`): the line is moving.
    told_elsewhere: AtomicU64,
    /// The latest grant received: the request the lock was granted to, and the look it names.
    grant: Mutex<Option<(String, u64)>>,
}

impl Wakeups {
    fn message(&self) {
        self.messages.fetch_add(1, Ordering::SeqCst);
    }

    fn wake_one(&self) {
        self.message();
        self.notify.notify_one();
    }

    fn wake_all(&self) {
        self.message();
        self.notify.notify_waiters();
        self.notify.notify_one();
    }
}

struct Entry {
    refs: usize,
    notify: Arc<Wakeups>,
    /// Subscribed right after the channel and left right before it, in the same command where
    /// one can (`LockKind::listening_channel`): never without the channel on this connection.
    companion: Option<String>,
}

impl Entry {
    /// The entry's `channel` and its companion, in the order they are subscribed.
    fn channels(&self, channel: &str) -> impl Iterator<Item = String> {
        std::iter::once(channel.to_owned()).chain(self.companion.clone())
    }
}

#[derive(Default)]
struct Channels(Mutex<HashMap<String, Entry>>);

impl Channels {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn wake_all(&self) {
        for entry in self.map().values() {
            entry.notify.wake_all();
        }
    }

    /// `channel` and its companion, in the order they are subscribed.
    fn with_companion(&self, channel: &str) -> Vec<String> {
        match self.map().get(channel) {
            Some(entry) => entry.channels(channel).collect(),
            None => vec![channel.to_owned()],
        }
    }
}

/// Where the pub/sub connection goes.
pub(crate) enum Source {
    Single(Box<redis::Client>),
    Sentinel(Arc<Sentinel>),
    Cluster {
        nodes: Vec<ConnectionInfo>,
        /// SSUBSCRIBE (Redis 7+) rather than SUBSCRIBE.
        sharded: bool,
        tls: crate::tls::Tls,
    },
}

/// The subscribing half of the current connection.
enum Sink {
    Plain(PubSubSink),
    Cluster {
        connection: ClusterConnection,
        sharded: bool,
    },
}

impl Sink {
    async fn subscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        self.change(channels, true).await
    }

    async fn unsubscribe(&mut self, channels: &[String]) -> redis::RedisResult<()> {
        self.change(channels, false).await
    }

    /// Subscribes to `channels` (or leaves them), in their order.
    async fn change(&mut self, channels: &[String], subscribe: bool) -> redis::RedisResult<()> {
        match self {
            Sink::Plain(sink) if subscribe => sink.subscribe(channels).await,
            Sink::Plain(sink) => sink.unsubscribe(channels).await,
            // One by one: channels of different slots live on different nodes.
            Sink::Cluster {
                connection,
                sharded,
            } => {
                for channel in channels {
                    match (subscribe, *sharded) {
                        (true, true) => connection.ssubscribe(channel).await?,
                        (true, false) => connection.subscribe(channel).await?,
                        (false, true) => connection.sunsubscribe(channel).await?,
                        (false, false) => connection.unsubscribe(channel).await?,
                    }
                }
                Ok(())
            }
        }
    }
}

enum Command {
    Subscribe(String, oneshot::Sender<Result<()>>),
    Unsubscribe(String),
    /// The server ended the subscription of a channel (its slot moved): subscribe again if
    /// it still has waiters.
    Resubscribe(String),
    /// Reconnect now (the primary changed).
    Reconnect,
    /// One node of a cluster connection dropped and is being reconnected by the crate.
    NodeDisconnected,
    /// The message stream of connection `generation` ended.
    Disconnected(u64),
    Shutdown,
}

pub(crate) struct Hub {
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
}

/// One waiter's hold on a channel subscription; dropping it releases the hold.
pub(crate) struct Subscription {
    channel: String,
    notify: Arc<Wakeups>,
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Subscription {
    /// How many messages the channel has had: take it before looking at the lock, and pass
    /// it to [`Subscription::wait`].
    pub(crate) fn messages(&self) -> u64 {
        self.notify.messages.load(Ordering::SeqCst)
    }

    /// Waits for a wake-up message, at most `max`; returns at once when a message came since
    /// `messages` was taken (so no wake-up meant for a waiter busy looking is lost). True when
    /// woken by a message.
    pub(crate) async fn wait(&self, max: Duration, messages: u64) -> bool {
        let notified = self.notify.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.messages() != messages {
            return true;
        }
        tokio::select! {
            _ = notified => true,
            _ = tokio::time::sleep(max) => false,
        }
    }

    /// Returns once `period` has passed without a release that told a waiter elsewhere (`00`):
    /// while such releases keep coming the line is moving, and a waiter need not look.
    pub(crate) async fn silence(&self, period: Duration) {
        loop {
            let seen = self.notify.told_elsewhere.load(Ordering::SeqCst);
            tokio::time::sleep(period).await;
            if self.notify.told_elsewhere.load(Ordering::SeqCst) == seen {
                return;
            }
        }
    }

    /// The look of `request` that the lock was granted to, if this channel received that grant
    /// (taken: it is read once).
    pub(crate) fn take_grant(&self, request: &str) -> Option<u64> {
        let mut grant = self.notify.grant.lock().unwrap_or_else(|p| p.into_inner());
        match grant.take() {
            Some((granted, look)) if granted == request => Some(look),
            other => {
                *grant = other;
                None
            }
        }
    }

    /// Passes a wake-up on to another local waiter (used by a woken waiter that leaves).
    pub(crate) fn pass_on(&self) {
        self.notify.notify.notify_one();
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = self.channels.map();
        if let Some(entry) = map.get_mut(&self.channel) {
            entry.refs -= 1;
            if entry.refs == 0 {
                let _ = self
                    .commands
                    .send(Command::Unsubscribe(self.channel.clone()));
            }
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Timeouts {
    pub connect: Duration,
    pub response: Duration,
}

impl Hub {
    /// Opens the pub/sub connection and starts the control task on the current runtime.
    pub(crate) async fn start(
        source: Source,
        timeouts: Timeouts,
        on_reconnect: ReconnectHook,
    ) -> Result<Hub> {
        let channels = Arc::new(Channels::default());
        let (commands, receiver) = mpsc::unbounded_channel();
        let mut control = Control {
            source,
            timeouts,
            channels: channels.clone(),
            commands: commands.clone(),
            sink: None,
            reader: None,
            generation: 0,
            on_reconnect,
        };
        control.connect().await?;
        tokio::spawn(control.run(receiver));
        Ok(Hub { channels, commands })
    }

    /// Subscribes to `channel` (or joins the existing subscription) and returns once Redis has
    /// confirmed it, so that no message sent after this returns can be missed. A `companion`
    /// is subscribed and left with it (the one given by the subscriber that opened it).
    pub(crate) async fn subscribe(
        &self,
        channel: &str,
        companion: Option<&str>,
    ) -> Result<Subscription> {
        let notify = {
            let mut map = self.channels.map();
            let entry = map.entry(channel.to_owned()).or_insert_with(|| Entry {
                refs: 0,
                notify: Arc::new(Wakeups::default()),
                companion: companion.map(str::to_owned),
            });
            entry.refs += 1;
            entry.notify.clone()
        };
        // Made before the request so that an error or cancellation gives the reference back.
        let subscription = Subscription {
            channel: channel.to_owned(),
            notify,
            channels: self.channels.clone(),
            commands: self.commands.clone(),
        };
        let (ack, confirmed) = oneshot::channel();
        self.commands
            .send(Command::Subscribe(channel.to_owned(), ack))
            .map_err(|_| closed())?;
        confirmed.await.map_err(|_| closed())??;
        Ok(subscription)
    }

    /// How many channels this client is subscribed to (for tests and diagnostics).
    pub(crate) fn subscribed_channels(&self) -> usize {
        self.channels.map().len()
    }

    /// The room the channel table keeps (entries it can hold without growing).
    #[cfg(test)]
    pub(crate) fn channel_table_room(&self) -> usize {
        self.channels.map().capacity()
    }

    /// Reconnects at once (to the new primary after a failover); waiters look again.
    pub(crate) fn reconnect(&self) {
        let _ = self.commands.send(Command::Reconnect);
    }

    /// Ends the control task and closes the connection; waiters are woken (and find the
    /// client closed).
    pub(crate) fn shutdown(&self) {
        let _ = self.commands.send(Command::Shutdown);
        self.channels.wake_all();
    }
}

fn closed() -> Error {
    Error::Connection("the client is closed: its pub/sub connection was shut down".into())
}

struct Control {
    source: Source,
    timeouts: Timeouts,
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
    sink: Option<Sink>,
    /// The task reading the current connection's messages.
    reader: Option<JoinHandle<()>>,
    generation: u64,
    on_reconnect: ReconnectHook,
}

impl Control {
    async fn run(mut self, mut receiver: mpsc::UnboundedReceiver<Command>) {
        loop {
            let command = if self.sink.is_some() {
                receiver.recv().await
            } else {
                // Disconnected: try again every RECONNECT_DELAY, commands still served.
                tokio::select! {
                    command = receiver.recv() => command,
                    _ = tokio::time::sleep(RECONNECT_DELAY) => {
                        self.reconnect().await;
                        continue;
                    }
                }
            };
            match command {
                None | Some(Command::Shutdown) => break,
                Some(Command::Subscribe(channel, ack)) => {
                    let result = self.subscribe(&channel).await;
                    let _ = ack.send(result);
                }
                Some(Command::Unsubscribe(channel)) => self.unsubscribe(channel).await,
                Some(Command::Resubscribe(channel)) => self.resubscribe(channel).await,
                Some(Command::NodeDisconnected) => {
                    tracing::warn!(
                        "a cluster node's pub/sub connection dropped; waiters look again"
                    );
                    self.after_reconnect();
                }
                Some(Command::Reconnect) => {
                    self.disconnect();
                    self.reconnect().await;
                }
                Some(Command::Disconnected(generation)) if generation == self.generation => {
                    tracing::warn!("pub/sub connection lost; reconnecting");
                    self.disconnect();
                    self.reconnect().await;
                }
                Some(Command::Disconnected(_)) => {}
            }
        }
        self.disconnect();
    }

    fn disconnect(&mut self) {
        self.sink = None;
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }

    async fn subscribe(&mut self, channel: &str) -> Result<()> {
        let Some(sink) = self.sink.as_mut() else {
            // `reconnect` subscribes to every channel in use, this one included.
            return match self.connect().await {
                Ok(()) => {
                    self.after_reconnect();
                    Ok(())
                }
                Err(err) => Err(err),
            };
        };
        let what = format!("subscribe to '{channel}'");
        let channels = self.channels.with_companion(channel);
        match tokio::time::timeout(self.timeouts.response, sink.subscribe(&channels)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => {
                let err = Error::from_redis(&what, err);
                // A refused channel (ACL) leaves the connection as good as it was.
                if err.kind() != crate::ErrorKind::Permission {
                    self.disconnect();
                }
                Err(err)
            }
            Err(_) => {
                self.disconnect();
                Err(Error::timed_out(&what, self.timeouts.response))
            }
        }
    }

    async fn unsubscribe(&mut self, channel: String) {
        let companion = {
            let mut map = self.channels.map();
            match map.get(&channel) {
                Some(entry) if entry.refs == 0 => {
                    remove_shrinking(&mut map, &channel).and_then(|e| e.companion)
                }
                // A new waiter joined since the last one left: keep the subscription.
                _ => return,
            }
        };
        // The companion first: it is never subscribed without its channel.
        let channels: Vec<String> = companion.into_iter().chain([channel]).collect();
        if let Some(sink) = self.sink.as_mut() {
            let done = tokio::time::timeout(self.timeouts.response, sink.unsubscribe(&channels));
            if !matches!(done.await, Ok(Ok(()))) {
                // A connection that cannot unsubscribe is suspect: start afresh.
                self.disconnect();
            }
        }
    }

    /// A channel the server unsubscribed us from: subscribe again where its slot lives now,
    /// if it still has waiters, and let them look (a message may have been missed).
    async fn resubscribe(&mut self, channel: String) {
        let Some(notify) = self
            .channels
            .map()
            .get(&channel)
            .filter(|entry| entry.refs > 0)
            .map(|entry| entry.notify.clone())
        else {
            return;
        };
        if self.sink.is_some() {
            if let Err(err) = self.subscribe(&channel).await {
                tracing::debug!(error = %err, %channel, "resubscribe failed; reconnecting");
            }
        }
        notify.wake_all();
    }

    /// Opens a pub/sub connection and subscribes to every channel that has waiters.
    async fn connect(&mut self) -> Result<()> {
        let wanted: Vec<String> = self
            .channels
            .map()
            .iter()
            .flat_map(|(channel, entry)| entry.channels(channel))
            .collect();
        let (mut sink, reader) = match &self.source {
            Source::Single(client) => self.connect_plain((**client).clone()).await?,
            Source::Sentinel(sentinel) => self.connect_plain(sentinel.primary_client()).await?,
            Source::Cluster {
                nodes,
                sharded,
                tls,
            } => {
                let tls = tls.clone();
                self.connect_cluster(nodes.clone(), *sharded, &tls).await?
            }
        };
        if !wanted.is_empty() {
            match tokio::time::timeout(self.timeouts.response, sink.subscribe(&wanted)).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => {
                    reader.abort();
                    return Err(Error::from_redis("resubscribe", err));
                }
                Err(_) => {
                    reader.abort();
                    return Err(Error::timed_out("resubscribe", self.timeouts.response));
                }
            }
        }
        self.reader = Some(reader);
        self.sink = Some(sink);
        Ok(())
    }

    async fn connect_plain(&mut self, client: redis::Client) -> Result<(Sink, JoinHandle<()>)> {
        let what = "open the pub/sub connection";
        let pubsub =
            match tokio::time::timeout(self.timeouts.connect, client.get_async_pubsub()).await {
                Ok(Ok(pubsub)) => pubsub,
                Ok(Err(err)) => return Err(Error::from_redis(what, err)),
                Err(_) => return Err(Error::timed_out(what, self.timeouts.connect)),
            };
        let (sink, mut stream) = pubsub.split();
        self.generation += 1;
        let generation = self.generation;
        let channels = self.channels.clone();
        let commands = self.commands.clone();
        let reader = tokio::spawn(async move {
            while let Some(message) = stream.next().await {
                dispatch(
                    &channels,
                    message.get_channel_name(),
                    message.get_payload_bytes(),
                );
            }
            let _ = commands.send(Command::Disconnected(generation));
        });
        Ok((Sink::Plain(sink), reader))
    }

    /// A cluster connection that delivers messages as RESP3 pushes; the `redis` crate
    /// reconnects its nodes and resubscribes by itself.
    async fn connect_cluster(
        &mut self,
        nodes: Vec<ConnectionInfo>,
        sharded: bool,
        tls: &crate::tls::Tls,
    ) -> Result<(Sink, JoinHandle<()>)> {
        let what = "open the pub/sub connection to the cluster";
        let (pushes, mut received) = mpsc::unbounded_channel::<PushInfo>();
        let client = tls
            .cluster(redis::cluster::ClusterClientBuilder::new(nodes))
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(pushes)
            .connection_timeout(self.timeouts.connect)
            .response_timeout(self.timeouts.response)
            .build()
            .map_err(|err| Error::from_redis(what, err))?;
        let connection = match tokio::time::timeout(
            self.timeouts.connect,
            client.get_async_connection(),
        )
        .await
        {
            Ok(Ok(connection)) => connection,
            Ok(Err(err)) => return Err(Error::from_redis(what, err)),
            Err(_) => return Err(Error::timed_out(what, self.timeouts.connect)),
        };
        self.generation += 1;
        let generation = self.generation;
        let channels = self.channels.clone();
        let commands = self.commands.clone();
        let reader = tokio::spawn(async move {
            while let Some(push) = received.recv().await {
                let channel = match push.data.first() {
                    Some(Value::BulkString(channel)) => {
                        String::from_utf8_lossy(channel).into_owned()
                    }
                    _ => String::new(),
                };
                match push.kind {
                    PushKind::Message | PushKind::SMessage => {
                        if let Some(Value::BulkString(payload)) = push.data.get(1) {
                            dispatch(&channels, &channel, payload);
                        }
                    }
                    PushKind::Unsubscribe | PushKind::SUnsubscribe => {
                        let _ = commands.send(Command::Resubscribe(channel));
                    }
                    // A node's connection dropped (the crate reconnects it): messages sent
                    // meanwhile are lost, so every waiter looks and every hold is checked.
                    PushKind::Disconnection => {
                        let _ = commands.send(Command::NodeDisconnected);
                    }
                    _ => {}
                }
            }
            let _ = commands.send(Command::Disconnected(generation));
        });
        Ok((
            Sink::Cluster {
                connection,
                sharded,
            },
            reader,
        ))
    }

    async fn reconnect(&mut self) {
        match self.connect().await {
            Ok(()) => self.after_reconnect(),
            Err(err) => tracing::debug!(error = %err, "pub/sub reconnect failed; retrying"),
        }
    }

    fn after_reconnect(&self) {
        tracing::info!("pub/sub connection re-established");
        // Messages sent while we were away are lost: every waiter looks again.
        self.channels.wake_all();
        (self.on_reconnect)();
    }
}

fn dispatch(channels: &Channels, channel: &str, payload: &[u8]) {
    // The handoff timeline (`examples/handoff.rs`): when the message reached this process.
    tracing::trace!(target: "polylock::handoff", "message");
    let map = channels.map();
    let Some(entry) = map.get(channel) else {
        return;
    };
    match payload {
        UNLOCKED => entry.notify.wake_one(),
        TOLD_ELSEWHERE => {
            entry.notify.told_elsewhere.fetch_add(1, Ordering::SeqCst);
        }
        // Every call of the owner waiting now looks whether the grant is its own. No permit is
        // stored for a later one (which would wake at once for a grant it cannot use, and look
        // again for nothing); one between its look and its sleep sees the message count move.
        granted if granted.starts_with(GRANTED) => {
            if let Some(grant) = parse_grant(&granted[GRANTED.len()..]) {
                *entry.notify.grant.lock().unwrap_or_else(|p| p.into_inner()) = Some(grant);
            }
            entry.notify.message();
            entry.notify.notify.notify_waiters();
        }
        READ_UNLOCKED => entry.notify.wake_all(),
        // A semaphore's release publishes the permits now available (any number): every local
        // waiter looks, since which of them the permits suit (one needing 1 or 3) only the
        // server can tell. Unknown payloads also mean the lock changed.
        _ => entry.notify.wake_all(),
    }
}

/// `<request>:<look>`, the rest of a grant message.
fn parse_grant(rest: &[u8]) -> Option<(String, u64)> {
    let rest = std::str::from_utf8(rest).ok()?;
    let (request, look) = rest.rsplit_once(':')?;
    Some((request.to_owned(), look.parse().ok()?))
}
