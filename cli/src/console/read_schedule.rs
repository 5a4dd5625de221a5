//! Which names a refresh reads for the list (one inspection script each): at most the budget
//! (`--reads-per-refresh`), the stalest first. So with N names and a budget B, each row is at
//! most ceil(N / B) refreshes old, and with N <= B every row is read at every refresh. (A lock's
//! page reads its own name at every refresh: `lock_page`.)

/// The names to read now, at most `budget` of `candidates` (each with when it was last read;
/// `None`: never), stalest first, ties in name order.
pub fn names_to_read<'a>(
    candidates: impl IntoIterator<Item = (&'a str, Option<i64>)>,
    budget: usize,
) -> Vec<String> {
    let mut turn: Vec<(Option<i64>, &str)> = candidates
        .into_iter()
        .map(|(name, read_ms)| (read_ms, name))
        .collect();
    turn.sort(); // `None` (never read) sorts first
    turn.into_iter()
        .take(budget)
        .map(|(_, name)| name.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stalest_first_within_the_budget() {
        let candidates = [
            ("a", Some(300)),
            ("b", None),
            ("c", Some(100)),
            ("d", Some(400)),
        ];
        assert_eq!(names_to_read(candidates, 3), ["b", "c", "a"]);
        assert_eq!(names_to_read(candidates, 10), ["b", "c", "a", "d"]);
        assert_eq!(names_to_read(candidates, 2), ["b", "c"]);
    }
}
