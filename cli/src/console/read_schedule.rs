//! Which names a refresh reads (one inspection script each): at most the budget
//! (`--reads-per-refresh`), the names that must be read at every refresh first (someone has
//! them open: [`EveryRefresh`]), then the stalest. So with N names and a budget B, each row is
//! at most ceil(N / B) refreshes old, and with N <= B every row is read at every refresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The names read at every refresh whatever their turn, each as often as it is asked for
/// (e.g. a lock's page, open in two tabs): [`EveryRefresh::while_open`] keeps one in until
/// its guard is dropped.
#[derive(Clone, Default)]
pub struct EveryRefresh {
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// Keeps its name read at every refresh while it lives.
pub struct OpenName {
    every_refresh: EveryRefresh,
    name: String,
}

impl EveryRefresh {
    pub fn while_open(&self, name: &str) -> OpenName {
        *self.lock().entry(name.to_owned()).or_default() += 1;
        OpenName {
            every_refresh: self.clone(),
            name: name.to_owned(),
        }
    }

    /// The names now, in order.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.lock().keys().cloned().collect();
        names.sort();
        names
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        // A panic elsewhere while holding it leaves a whole map: keep using it.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for OpenName {
    fn drop(&mut self) {
        let mut open = self.every_refresh.lock();
        if let Some(count) = open.get_mut(&self.name) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.name);
            }
        }
    }
}

/// The names to read now, at most `budget`: those of `every_refresh` first, then the others of
/// `candidates` (each with when it was last read; `None`: never) stalest first, ties in name
/// order.
pub fn names_to_read<'a>(
    candidates: impl IntoIterator<Item = (&'a str, Option<i64>)>,
    every_refresh: &[String],
    budget: usize,
) -> Vec<String> {
    let mut turn: Vec<(Option<i64>, &str)> = candidates
        .into_iter()
        .filter(|(name, _)| !every_refresh.iter().any(|open| open == name))
        .map(|(name, read_ms)| (read_ms, name))
        .collect();
    turn.sort(); // `None` (never read) sorts first
    every_refresh
        .iter()
        .map(String::as_str)
        .chain(turn.into_iter().map(|(_, name)| name))
        .take(budget)
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_names_first_then_the_stalest_within_the_budget() {
        let every_refresh = EveryRefresh::default();
        let open = every_refresh.while_open("d");
        let again = every_refresh.while_open("d");
        let candidates = [
            ("a", Some(300)),
            ("b", None),
            ("c", Some(100)),
            ("d", Some(400)),
        ];
        let names = every_refresh.names();
        assert_eq!(names_to_read(candidates, &names, 3), ["d", "b", "c"]);
        assert_eq!(names_to_read(candidates, &names, 10), ["d", "b", "c", "a"]);
        drop(open);
        assert_eq!(every_refresh.names(), ["d"], "still open once");
        drop(again);
        assert!(every_refresh.names().is_empty());
        assert_eq!(names_to_read(candidates, &[], 2), ["b", "c"]);
    }
}
