//! The maps of the engine's bookkeeping (holds, renewals, releases in flight, connections by
//! runtime): each lock call looks in several, so they hash with foldhash, several times
//! cheaper than the standard SipHash on a lock's name and owner, and still seeded at random
//! per map; and they give their memory back once empty.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// A map of the engine's bookkeeping.
pub(crate) type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Removes `key` from `map`; the last entry out frees the table. A `HashMap` never shrinks by
/// itself, and under churn of keys that never come back (hold ids) the deleted slots it keeps
/// make it grow past what its busiest moment needed: a client's maps would keep that memory,
/// and gain more round after round, after everything was released.
pub(crate) fn remove_shrinking<K, Q, V, S>(map: &mut HashMap<K, V, S>, key: &Q) -> Option<V>
where
    K: Eq + Hash + Borrow<Q>,
    Q: Eq + Hash + ?Sized,
    S: BuildHasher,
{
    let removed = map.remove(key);
    if map.is_empty() {
        map.shrink_to_fit();
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_entry_out_frees_the_table() {
        let mut map: Map<u64, u64> = (0..1000).map(|id| (id, id)).collect();
        for id in 0..999 {
            assert_eq!(remove_shrinking(&mut map, &id), Some(id));
            assert!(map.capacity() >= 1000 - id as usize - 1);
        }
        assert_eq!(remove_shrinking(&mut map, &999), Some(999));
        assert_eq!(map.capacity(), 0);
        assert_eq!(remove_shrinking(&mut map, &999), None);
    }
}
