//! What the handles on a counter in Redis (the semaphore, the count-down latch) keep of it: the
//! client, the name, its key and channel. Their errors name it the same way.

use std::sync::Arc;

use crate::engine::context::ClientInner;

pub(crate) struct Named {
    pub client: Arc<ClientInner>,
    /// The name as the user gave it (errors, metrics).
    pub name: String,
    /// The name under the client's key prefix: the counter's key, from which the channel and
    /// latches derive.
    pub key: String,
    pub channel: String,
    /// How errors call it: `semaphore`, `count-down latch`.
    noun: &'static str,
}

impl Named {
    /// `channel_of` derives the channel from the key.
    pub(crate) fn new(
        client: Arc<ClientInner>,
        name: &str,
        noun: &'static str,
        channel_of: fn(&str) -> String,
    ) -> Named {
        let key = client.key_of(name);
        Named {
            channel: channel_of(&key),
            key,
            client,
            name: name.to_owned(),
            noun,
        }
    }

    /// What an error says was being done: `<action> <noun> '<name>'`.
    pub(crate) fn what(&self, action: &str) -> String {
        format!("{action} {} '{}'", self.noun, self.name)
    }

    /// The handle's `Debug`: its type and name.
    pub(crate) fn debug(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        type_name: &str,
    ) -> std::fmt::Result {
        f.debug_struct(type_name).field("name", &self.name).finish()
    }
}
