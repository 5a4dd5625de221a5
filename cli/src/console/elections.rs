//! The timeline's `new-leader` entries: an election whose leader at one reading is not the one
//! of the reading before (a new term: terms only grow), or that had no leader listed then.

use std::collections::HashMap;

use super::snapshot::LockView;
use crate::inspect::{Kind, Leader};

/// The entries (kind, election name, text) for the leaders new between `before` and `now`.
pub fn leader_changes(
    before: &[LockView],
    now: &[LockView],
) -> Vec<(&'static str, String, String)> {
    let leaders_before: HashMap<&str, &Leader> = before
        .iter()
        .filter(|lock| lock.state.kind == Kind::Election)
        .filter_map(|lock| Some((lock.state.name.as_str(), lock.state.leader.as_ref()?)))
        .collect();
    let mut found = Vec::new();
    for lock in now.iter().filter(|lock| lock.state.kind == Kind::Election) {
        let Some(leader) = &lock.state.leader else {
            continue;
        };
        let name = &lock.state.name;
        let was = match leaders_before.get(name.as_str()) {
            Some(was) if was.term == leader.term => continue,
            Some(was) => format!("before: {}, term {}", who(was), was.term),
            None => "before: nobody led, as last read".to_owned(),
        };
        found.push((
            "new-leader",
            name.clone(),
            format!(
                "election '{name}': new leader {}, term {}, value '{}' ({was})",
                who(leader),
                leader.term,
                leader.value
            ),
        ));
    }
    found
}

/// The leader's client, as its record names it, else as it announced itself, else its owner.
fn who(leader: &Leader) -> String {
    match (&leader.client.text, leader.announced_by.as_str()) {
        (Some(text), _) => text.clone(),
        (None, "") => leader.owner.clone(),
        (None, announced) => format!("{announced} (owner {})", leader.owner),
    }
}
