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

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use redis::cluster_async::ClusterConnection;
use redis::{ConnectionInfo, PushInfo, PushKind, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::connection::sentinel::Sentinel;
use crate::connection::Timeouts;
use crate::foundation::error::{Error, Result};
use crate::foundation::maps::{remove_shrinking, Map};
use crate::metrics::Metrics;

/// Delay before the next attempt to re-establish a broken pub/sub connection.
const RECONNECT_DELAY: Duration = Duration::from_millis(200);

/// Called after the pub/sub connection came back.
pub(crate) type ReconnectHook = Box<dyn Fn() + Send + Sync>;

/// What the hub keeps per channel, shared by the channel's local subscribers, and how it reads
/// the channel's messages: the hub itself gives no meaning to any message (the lock messages
/// are read in `crate::kinds::messages`).
pub(crate) trait ChannelState: Default + Send + Sync + 'static {
    /// A message arrived on the channel.
    fn on_message(&self, payload: &[u8]);
    /// Messages may have been missed (the connection came back, the channel's slot moved) or
    /// the hub shuts down: every subscriber should look again.
    fn on_gap(&self);
}

struct Entry<S> {
    refs: usize,
    notify: Arc<S>,
    /// Subscribed right after the channel and left right before it, in the same command where
    /// one can (`LockKind::listening_channel`): never without the channel on this connection.
    companion: Option<String>,
}

impl<S> Entry<S> {
    /// The entry's `channel` and its companion, in the order they are subscribed.
    fn channels(&self, channel: &str) -> impl Iterator<Item = String> {
        std::iter::once(channel.to_owned()).chain(self.companion.clone())
    }
}

/// The channels in use, and the client's metrics, which count them (a channel and its
/// companion count as two) from when they enter the table until they leave it.
struct Channels<S> {
    map: Mutex<Map<String, Entry<S>>>,
    metrics: Arc<Metrics>,
}

impl<S> Channels<S> {
    fn map(&self) -> MutexGuard<'_, Map<String, Entry<S>>> {
        self.map
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<S: ChannelState> Channels<S> {
    fn wake_all(&self) {
        for entry in self.map().values() {
            entry.notify.on_gap();
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
        tls: crate::settings::tls::Tls,
    },
    /// Test only: the protocol explorer's seam.
    #[cfg(feature = "explorer")]
    Explored(Arc<crate::connection::explored::Bus>),
}

/// The subscribing half of the current connection.
enum Sink {
    Plain(PubSubSink),
    Cluster {
        connection: ClusterConnection,
        sharded: bool,
    },
    #[cfg(feature = "explorer")]
    Explored(Arc<crate::connection::explored::Bus>),
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
            #[cfg(feature = "explorer")]
            Sink::Explored(bus) => {
                bus.subscribe(channels, subscribe);
                Ok(())
            }
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

pub(crate) struct Hub<S> {
    channels: Arc<Channels<S>>,
    commands: mpsc::UnboundedSender<Command>,
}

/// One waiter's hold on a channel subscription; dropping it releases the hold.
pub(crate) struct Subscription<S> {
    channel: String,
    notify: Arc<S>,
    channels: Arc<Channels<S>>,
    commands: mpsc::UnboundedSender<Command>,
}

impl<S> Subscription<S> {
    /// The channel's state, shared with its other local subscribers.
    pub(crate) fn state(&self) -> &S {
        &self.notify
    }
}

impl<S> Drop for Subscription<S> {
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

impl<S: ChannelState> Hub<S> {
    /// Opens the pub/sub connection and starts the control task on the current runtime.
    pub(crate) async fn start(
        source: Source,
        timeouts: Timeouts,
        on_reconnect: ReconnectHook,
        metrics: Arc<Metrics>,
    ) -> Result<Hub<S>> {
        let channels = Arc::new(Channels {
            map: Mutex::default(),
            metrics,
        });
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
    ) -> Result<Subscription<S>> {
        let notify = {
            let mut map = self.channels.map();
            // The control task takes no more commands and takes the table off the count as it
            // ends: a channel entering now would stay counted (see the end of `Control::run`).
            if self.commands.is_closed() {
                return Err(closed());
            }
            let entry = map.entry(channel.to_owned()).or_insert_with(|| {
                let companion = companion.map(str::to_owned);
                let channels = 1 + i64::from(companion.is_some());
                self.channels.metrics.subscriptions_changed(channels);
                Entry {
                    refs: 0,
                    notify: Arc::new(S::default()),
                    companion,
                }
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

    /// Whether the control task has ended (its command queue is gone).
    #[cfg(test)]
    pub(crate) fn control_ended(&self) -> bool {
        self.commands.is_closed()
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
    Error::connection("the client is closed: its pub/sub connection was shut down")
}

struct Control<S> {
    source: Source,
    timeouts: Timeouts,
    channels: Arc<Channels<S>>,
    commands: mpsc::UnboundedSender<Command>,
    sink: Option<Sink>,
    /// The task reading the current connection's messages.
    reader: Option<JoinHandle<()>>,
    generation: u64,
    on_reconnect: ReconnectHook,
}

impl<S: ChannelState> Control<S> {
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
        // Closed before the count, so that a `subscribe` taking the table's lock after the
        // count finds the queue closed and adds no channel to it.
        drop(receiver);
        // Nothing is subscribed any more (the entries stay for the subscriptions still held).
        let channels: usize = self
            .channels
            .map()
            .values()
            .map(|entry| 1 + usize::from(entry.companion.is_some()))
            .sum();
        self.channels
            .metrics
            .subscriptions_changed(-(channels as i64));
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
                    let companion = remove_shrinking(&mut map, &channel).and_then(|e| e.companion);
                    let channels = 1 + i64::from(companion.is_some());
                    self.channels.metrics.subscriptions_changed(-channels);
                    companion
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
        notify.on_gap();
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
            #[cfg(feature = "explorer")]
            Source::Explored(bus) => self.connect_explored(bus.clone()),
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
        tls: &crate::settings::tls::Tls,
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

    /// The explorer's seam: messages come from its bus.
    #[cfg(feature = "explorer")]
    fn connect_explored(
        &mut self,
        bus: Arc<crate::connection::explored::Bus>,
    ) -> (Sink, JoinHandle<()>) {
        let (inbox, mut received) = mpsc::unbounded_channel::<(String, Vec<u8>)>();
        bus.connect(inbox);
        self.generation += 1;
        let generation = self.generation;
        let channels = self.channels.clone();
        let commands = self.commands.clone();
        let reader = tokio::spawn(async move {
            while let Some((channel, payload)) = received.recv().await {
                dispatch(&channels, &channel, &payload);
            }
            // The explorer cut the connection (`Bus::cut`).
            let _ = commands.send(Command::Disconnected(generation));
        });
        (Sink::Explored(bus), reader)
    }

    async fn reconnect(&mut self) {
        match self.connect().await {
            Ok(()) => self.after_reconnect(),
            Err(err) => tracing::debug!(error = %err, "pub/sub reconnect failed; retrying"),
        }
    }

    fn after_reconnect(&self) {
        tracing::info!("pub/sub connection re-established");
        self.channels.metrics.reconnected();
        // Messages sent while we were away are lost: every waiter looks again.
        self.channels.wake_all();
        (self.on_reconnect)();
    }
}

fn dispatch<S: ChannelState>(channels: &Channels<S>, channel: &str, payload: &[u8]) {
    // The handoff timeline (`examples/handoff.rs`): when the message reached this process.
    tracing::trace!(target: "polylock::handoff", "message");
    if let Some(entry) = channels.map().get(channel) {
        entry.notify.on_message(payload);
    }
}
