//! The pub/sub waiter: one connection per client, one subscription per channel shared by all
//! local waiters (reference-counted), resubscribed after a reconnect.
//!
//! SUBSCRIBE and UNSUBSCRIBE go through one control task in order, so an unsubscribe of a
//! channel whose last waiter left can never overtake the subscribe of the next waiter.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::error::{Error, Result};

/// Payload of an unlock message that frees the lock for one waiter.
const UNLOCKED: &[u8] = b"0";
/// Payload of a read-unlock message that frees it for every waiter.
const READ_UNLOCKED: &[u8] = b"1";
/// Delay before the next attempt to re-establish a broken pub/sub connection.
const RECONNECT_DELAY: Duration = Duration::from_millis(200);

/// The local waiters on one channel.
pub(crate) struct ChannelWaiters {
    notify: Notify,
}

impl ChannelWaiters {
    /// Passes a wake-up on to another local waiter (used by a woken waiter that gives up).
    pub(crate) fn pass_on(&self) {
        self.notify.notify_one();
    }
}

struct Entry {
    refs: usize,
    waiters: Arc<ChannelWaiters>,
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
            entry.waiters.notify.notify_waiters();
            entry.waiters.notify.notify_one();
        }
    }
}

enum Command {
    Subscribe(String, oneshot::Sender<Result<()>>),
    Unsubscribe(String),
    /// The message stream of connection `generation` ended.
    Disconnected(u64),
    Reconnect,
}

/// The pub/sub side of a client.
pub(crate) struct Hub {
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
}

/// One waiter's hold on a channel subscription; dropping it releases the hold.
pub(crate) struct Subscription {
    channel: String,
    waiters: Arc<ChannelWaiters>,
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
}

impl Subscription {
    /// Waits for a wake-up message, at most `max`. True when woken by a message.
    pub(crate) async fn wait(&self, max: Duration) -> bool {
        tokio::select! {
            _ = self.waiters.notify.notified() => true,
            _ = tokio::time::sleep(max) => false,
        }
    }

    pub(crate) fn waiters(&self) -> &ChannelWaiters {
        &self.waiters
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

impl Hub {
    /// Starts the control task on the current runtime. No connection is made until the first
    /// subscription.
    pub(crate) fn start(client: redis::Client, timeouts: Timeouts) -> Hub {
        let channels = Arc::new(Channels::default());
        let (commands, receiver) = mpsc::unbounded_channel();
        let control = Control {
            client,
            timeouts,
            channels: channels.clone(),
            commands: commands.clone(),
            sink: None,
            generation: 0,
        };
        tokio::spawn(control.run(receiver));
        Hub { channels, commands }
    }

    /// Subscribes to `channel` (or joins the existing subscription) and returns once Redis has
    /// confirmed it, so that no message sent after this returns can be missed.
    pub(crate) async fn subscribe(&self, channel: &str) -> Result<Subscription> {
        let waiters = {
            let mut map = self.channels.map();
            let entry = map.entry(channel.to_owned()).or_insert_with(|| Entry {
                refs: 0,
                waiters: Arc::new(ChannelWaiters {
                    notify: Notify::new(),
                }),
            });
            entry.refs += 1;
            entry.waiters.clone()
        };
        // Made before the request so that an error or cancellation gives the reference back.
        let subscription = Subscription {
            channel: channel.to_owned(),
            waiters,
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
}

fn closed() -> Error {
    Error::Connection("the client is closed: its pub/sub connection was shut down".into())
}

#[derive(Clone, Copy)]
pub(crate) struct Timeouts {
    pub connect: Duration,
    pub response: Duration,
}

struct Control {
    client: redis::Client,
    timeouts: Timeouts,
    channels: Arc<Channels>,
    commands: mpsc::UnboundedSender<Command>,
    sink: Option<PubSubSink>,
    generation: u64,
}

impl Control {
    async fn run(mut self, mut receiver: mpsc::UnboundedReceiver<Command>) {
        // Ends when the hub and every subscription are gone: the client was dropped or closed.
        while let Some(command) = receiver.recv().await {
            match command {
                Command::Subscribe(channel, ack) => {
                    let result = self.subscribe(&channel).await;
                    let _ = ack.send(result);
                }
                Command::Unsubscribe(channel) => self.unsubscribe(channel).await,
                Command::Disconnected(generation) if generation == self.generation => {
                    tracing::warn!("pub/sub connection lost; reconnecting");
                    self.sink = None;
                    self.reconnect().await;
                }
                Command::Disconnected(_) => {}
                Command::Reconnect => {
                    if self.sink.is_none() {
                        self.reconnect().await;
                    }
                }
            }
        }
    }

    async fn subscribe(&mut self, channel: &str) -> Result<()> {
        if self.sink.is_none() {
            // `connect` subscribes to every channel in use, this one included.
            return self.connect().await;
        }
        let sink = self.sink.as_mut().expect("checked above");
        match tokio::time::timeout(self.timeouts.response, sink.subscribe(channel)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => {
                self.sink = None;
                Err(Error::from_redis(&format!("subscribe to '{channel}'"), err))
            }
            Err(_) => {
                self.sink = None;
                Err(Error::timed_out(
                    &format!("subscribe to '{channel}'"),
                    self.timeouts.response,
                ))
            }
        }
    }

    async fn unsubscribe(&mut self, channel: String) {
        {
            let mut map = self.channels.map();
            match map.get(&channel) {
                Some(entry) if entry.refs == 0 => {
                    map.remove(&channel);
                }
                // A new waiter joined since the last one left: keep the subscription.
                _ => return,
            }
        }
        if let Some(sink) = self.sink.as_mut() {
            let done = tokio::time::timeout(self.timeouts.response, sink.unsubscribe(&channel));
            if !matches!(done.await, Ok(Ok(()))) {
                // A connection that cannot unsubscribe is suspect; the next subscriber reconnects.
                self.sink = None;
            }
        }
    }

    /// Opens a pub/sub connection and subscribes to every channel that has waiters.
    async fn connect(&mut self) -> Result<()> {
        let what = "open the pub/sub connection";
        let pubsub =
            match tokio::time::timeout(self.timeouts.connect, self.client.get_async_pubsub()).await
            {
                Ok(Ok(pubsub)) => pubsub,
                Ok(Err(err)) => return Err(Error::from_redis(what, err)),
                Err(_) => return Err(Error::timed_out(what, self.timeouts.connect)),
            };
        let (mut sink, mut stream) = pubsub.split();
        let wanted: Vec<String> = self.channels.map().keys().cloned().collect();
        if !wanted.is_empty() {
            match tokio::time::timeout(self.timeouts.response, sink.subscribe(&wanted)).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(Error::from_redis("resubscribe", err)),
                Err(_) => return Err(Error::timed_out("resubscribe", self.timeouts.response)),
            }
        }
        self.generation += 1;
        let generation = self.generation;
        let channels = self.channels.clone();
        let commands = self.commands.clone();
        tokio::spawn(async move {
            while let Some(message) = stream.next().await {
                dispatch(
                    &channels,
                    message.get_channel_name(),
                    message.get_payload_bytes(),
                );
            }
            let _ = commands.send(Command::Disconnected(generation));
        });
        self.sink = Some(sink);
        Ok(())
    }

    async fn reconnect(&mut self) {
        if self.channels.map().is_empty() {
            return; // nobody waits: the next subscriber connects
        }
        match self.connect().await {
            // Messages sent while we were away are lost: every waiter retries now.
            Ok(()) => self.channels.wake_all(),
            Err(err) => {
                tracing::warn!(error = %err, "pub/sub reconnect failed; retrying");
                let commands = self.commands.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(RECONNECT_DELAY).await;
                    let _ = commands.send(Command::Reconnect);
                });
            }
        }
    }
}

fn dispatch(channels: &Channels, channel: &str, payload: &[u8]) {
    let map = channels.map();
    let Some(entry) = map.get(channel) else {
        return;
    };
    match payload {
        UNLOCKED => entry.waiters.notify.notify_one(),
        READ_UNLOCKED => {
            entry.waiters.notify.notify_waiters();
            entry.waiters.notify.notify_one();
        }
        // Unknown payloads still mean the lock changed: let one waiter look.
        _ => entry.waiters.notify.notify_one(),
    }
}
