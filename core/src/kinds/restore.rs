//! The uncontended acquire of the reentrant and fair locks writes the new lock hash `{owner: 1,
//! level field: 1}` and its TTL with one `RESTORE` of a payload the client builds, instead of
//! `HSET` then `PEXPIRE` (a hash cannot be created with a TTL): one server call fewer per lock
//! cycle.
//!
//! The payload is what `DUMP` of that hash would give, in the oldest form every supported
//! server loads: a plain hash (RDB type 4) of RDB version 9 (Redis 6.2); Redis 7+ and Valkey
//! load older versions and store the hash as they store a small one of their own (listpack,
//! ziplist on 6.2). A server that refuses `RESTORE` (a user without `+restore`, a managed
//! service that renamed it) gets `HSET` and `PEXPIRE` in the same script, which tells the
//! client so; the client then sends no more payloads.

use std::sync::atomic::{AtomicBool, Ordering};

use redis::Value;

use crate::kinds::{read_queued_acquire, Attempt};

/// Redis's CRC-64 (Jones polynomial), which ends a `DUMP` payload.
const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
/// RDB object type of a hash stored as field, value pairs.
const RDB_TYPE_HASH: u8 = 4;
/// RDB version 9 (Redis 6.2): the oldest among the supported servers, so each of them loads it.
const RDB_VERSION: u16 = 9;
/// The level field's prefix, as `lock_fields.lua` names it.
const LEVEL_FIELD_PREFIX: &str = "polylock:level:";
/// The acquire script's reply when `RESTORE` was refused and it wrote the hash without it.
const WRITTEN_WITHOUT_RESTORE: &str = "WRITTEN_WITHOUT_RESTORE";

/// Whether a client's uncontended acquires send a payload to restore. One per client: a
/// server that refused `RESTORE` once is not asked again by any lock of the client.
#[derive(Debug, Default)]
pub(crate) struct HashWrites {
    refused: AtomicBool,
}

impl HashWrites {
    /// The payload for the acquire script: the new lock hash of `owner`'s level `request`, or
    /// empty once the server refused `RESTORE` (the script then writes it with `HSET`).
    pub(crate) fn payload(&self, owner: &str, request: &str) -> Vec<u8> {
        if self.refused.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let level_field = format!("{LEVEL_FIELD_PREFIX}{request}");
        lock_hash_dump(&[(owner.as_bytes(), b"1"), (level_field.as_bytes(), b"1")])
    }

    /// Reads an acquire reply of a script that takes a payload: `WRITTEN_WITHOUT_RESTORE` is
    /// an acquisition after which no more payloads are sent; the rest as
    /// [`read_queued_acquire`].
    pub(crate) fn read_acquire(&self, reply: Value) -> Result<Attempt, Value> {
        match reply {
            Value::SimpleString(ref status) if status == WRITTEN_WITHOUT_RESTORE => {
                self.restore_refused();
                Ok(Attempt::Acquired { token: None })
            }
            reply => read_queued_acquire(reply),
        }
    }

    /// The server refused `RESTORE`: write without it from now on (said once per client).
    fn restore_refused(&self) {
        if !self.refused.swap(true, Ordering::Relaxed) {
            tracing::info!(
                "the server refused RESTORE: this client's lock acquires write the lock hash \
                 with HSET and PEXPIRE, one server call more (polylock::acl::restore_rule grants it)"
            );
        }
    }
}

/// A `DUMP` payload of a hash with `fields`: type, field count, each field and value as an RDB
/// string, the RDB version (2 bytes) and the CRC-64 of all that (8 bytes), little-endian.
fn lock_hash_dump(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut payload = vec![RDB_TYPE_HASH];
    push_length(&mut payload, fields.len());
    for (field, value) in fields {
        push_string(&mut payload, field);
        push_string(&mut payload, value);
    }
    payload.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    payload
}

fn push_string(payload: &mut Vec<u8>, bytes: &[u8]) {
    push_length(payload, bytes.len());
    payload.extend_from_slice(bytes);
}

/// RDB's length encoding: 6 bits in one byte, 14 bits in two, or a marker and 32 bits
/// big-endian.
fn push_length(payload: &mut Vec<u8>, length: usize) {
    match length {
        0..64 => payload.push(length as u8),
        64..16384 => payload.extend_from_slice(&[0x40 | (length >> 8) as u8, length as u8]),
        _ => {
            payload.push(0x80);
            payload.extend_from_slice(&(length as u32).to_be_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_field_is_the_scripts() {
        let fields = include_str!("lock_fields.lua");
        assert!(fields.contains(&format!(
            "local LEVEL_FIELD_PREFIX = '{LEVEL_FIELD_PREFIX}'"
        )));
    }

    #[test]
    fn the_crc_is_redis_own() {
        // The check value of Redis's crc64 self-test (src/crc64.c).
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn a_payload_is_the_hash_in_rdb_form() {
        let payload = lock_hash_dump(&[(b"o", b"1")]);
        assert_eq!(&payload[..7], &[4, 1, 1, b'o', 1, b'1', 9]);
        assert_eq!(payload[7], 0);
        let crc = CRC64.checksum(&payload[..8]);
        assert_eq!(payload[8..], crc.to_le_bytes());
    }

    #[test]
    fn lengths_take_the_encoding_their_size_needs() {
        for (length, head) in [
            (63, vec![63]),
            (64, vec![0x40, 64]),
            (16383, vec![0x7f, 0xff]),
            (16384, vec![0x80, 0, 0, 0x40, 0]),
        ] {
            let mut bytes = Vec::new();
            push_length(&mut bytes, length);
            assert_eq!(bytes, head, "length {length}");
        }
    }

    #[test]
    fn a_client_told_of_a_refusal_sends_no_more_payloads() {
        let writes = HashWrites::default();
        assert!(!writes.payload("owner", "request").is_empty());
        let refused = Value::SimpleString(WRITTEN_WITHOUT_RESTORE.to_owned());
        assert!(matches!(
            writes.read_acquire(refused),
            Ok(Attempt::Acquired { token: None })
        ));
        assert!(writes.payload("owner", "request").is_empty());
    }

    #[test]
    fn the_scripts_name_the_refusal_as_the_client_reads_it() {
        let reply = format!("redis.status_reply('{WRITTEN_WITHOUT_RESTORE}')");
        assert!(include_str!("reentrant/acquire_uncontended.lua").contains(&reply));
        // The fair and FIFO locks' acquires write the first level with `write_first_level`.
        assert!(include_str!("lock_hash.lua").contains(&reply));
        for acquire in [
            include_str!("fair/acquire.lua"),
            include_str!("fifo/acquire.lua"),
        ] {
            assert!(acquire.contains("write_first_level("));
        }
    }
}
