//! Maps that give their memory back once empty.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

/// Removes `key` from `map`; the last entry out frees the table. A `HashMap` never shrinks by
/// itself, and under churn of keys that never come back (hold ids) the deleted slots it keeps
/// make it grow past what its busiest moment needed: a client's maps would keep that memory,
/// and gain more round after round, after everything was released.
pub(crate) fn remove_shrinking<K, Q, V>(map: &mut HashMap<K, V>, key: &Q) -> Option<V>
where
    K: Eq + Hash + Borrow<Q>,
    Q: Eq + Hash + ?Sized,
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
        let mut map: HashMap<u64, u64> = (0..1000).map(|id| (id, id)).collect();
        for id in 0..999 {
            assert_eq!(remove_shrinking(&mut map, &id), Some(id));
            assert!(map.capacity() >= 1000 - id as usize - 1);
        }
        assert_eq!(remove_shrinking(&mut map, &999), Some(999));
        assert_eq!(map.capacity(), 0);
        assert_eq!(remove_shrinking(&mut map, &999), None);
    }
}
