//! The search: exhaustive DFS over choice sequences up to a bound, each node reached by
//! replaying its prefix on a FLUSHALL'd server at the same frozen time; then seeded random
//! walks. Reduction: a state (server contents, model, faults used) already explored at a depth
//! no greater is not explored again, so interleavings of independent steps (deliveries to
//! different clients, clock moves) that meet again are explored once.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use super::model::ClientSpec;
use super::properties::{after_step, at_quiescence, Violation};
use super::server::Server;
use super::world::{Faults, Mode, Step, World};

/// Every key but the explorer's own, with its type, contents and PTTL, sorted.
const DUMP: &str = r#"
local keys = redis.call('keys', '*')
table.sort(keys)
local out = {}
for _, key in ipairs(keys) do
  if string.sub(key, 1, 9) ~= 'explorer:' then
    local kind = redis.call('type', key)['ok']
    local items
    if kind == 'string' then items = {redis.call('get', key)}
    elseif kind == 'hash' then items = redis.call('hgetall', key)
    elseif kind == 'zset' then items = redis.call('zrange', key, 0, -1, 'withscores')
    elseif kind == 'list' then items = redis.call('lrange', key, 0, -1)
    else items = {} end
    if kind == 'hash' then
      local pairs = {}
      for i = 1, #items, 2 do pairs[#pairs + 1] = items[i] .. '=' .. items[i + 1] end
      table.sort(pairs)
      items = pairs
    end
    out[#out + 1] = key .. ' ' .. kind .. ' ' .. table.concat(items, ',') .. ' @' .. redis.call('pttl', key)
  end
end
return out
"#;

/// How far the search goes.
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    /// Steps per path, exhaustively.
    pub depth: usize,
    /// Faults per path.
    pub faults: usize,
    /// Random walks after the exhaustive part, each of `walk_depth` steps at most, with up to
    /// `walk_faults` faults.
    pub walks: usize,
    pub walk_depth: usize,
    pub walk_faults: usize,
    pub seed: u64,
}

#[derive(Clone)]
pub(crate) struct Scenario {
    pub name: &'static str,
    pub mode: Mode,
    pub clients: Vec<ClientSpec>,
    pub faults: Faults,
}

pub(crate) struct Finding {
    pub violation: Violation,
    pub choices: Vec<usize>,
    pub seed: Option<u64>,
    /// The fault budget its choices were made under (a replay needs it).
    pub faults: usize,
    pub log: String,
}

#[derive(Default)]
pub(crate) struct Report {
    pub states: usize,
    pub paths: usize,
    pub walks: usize,
    pub elapsed: Duration,
    pub finding: Option<Finding>,
}

impl Report {
    pub(crate) fn summary(&self, scenario: &Scenario) -> String {
        let mut text = format!(
            "explorer {} ({:?}): {} states, {} paths, {} random walks in {:.1?}",
            scenario.name, scenario.mode, self.states, self.paths, self.walks, self.elapsed
        );
        if let Some(finding) = &self.finding {
            text += &format!(
                "\nFOUND: {} — {}\n{}  replay: POLYLOCK_EXPLORER_REPLAY='{}:{}:{}' cargo test -p polylock --features explorer --lib explorer::tests::replay -- --ignored --nocapture{}",
                finding.violation.property,
                finding.violation.detail,
                finding.log,
                scenario.name,
                finding.faults,
                finding
                    .choices
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                finding
                    .seed
                    .map_or(String::new(), |seed| format!(" (random walk, seed {seed})")),
            );
        }
        text
    }
}

pub(crate) struct Explorer<'a> {
    server: &'a mut Server,
    scenario: &'a Scenario,
    visited: HashMap<u64, usize>,
    report: Report,
}

/// The steps possible now within the fault budget, in a fixed order (a choice is an index).
fn choices(world: &World, scenario: &Scenario, now: u64, faults_left: bool) -> Vec<Step> {
    let mut steps = world.enabled(&scenario.faults, now);
    if !faults_left {
        steps.retain(|step| !step.is_fault());
    }
    steps
}

impl<'a> Explorer<'a> {
    pub(crate) fn new(server: &'a mut Server, scenario: &'a Scenario) -> Explorer<'a> {
        Explorer {
            server,
            scenario,
            visited: HashMap::new(),
            report: Report::default(),
        }
    }

    /// Replays `choices` from an empty server; stops at the first violation.
    pub(crate) fn replay(
        &mut self,
        choices_made: &[usize],
        faults: usize,
    ) -> (World, usize, Option<Violation>) {
        let mut world = World::new(self.server, self.scenario.mode, &self.scenario.clients);
        let mut used = 0;
        for &choice in choices_made {
            let now = self.server.now_ms();
            let step = choices(&world, self.scenario, now, used < faults)[choice];
            used += step.is_fault() as usize;
            world.apply(self.server, step);
            if let Some(violation) = self.check(&world, step) {
                return (world, used, Some(violation));
            }
        }
        (world, used, None)
    }

    fn check(&mut self, world: &World, step: Step) -> Option<Violation> {
        after_step(world, self.server, step).or_else(|| {
            let now = self.server.now_ms();
            world
                .quiescent(now)
                .then(|| at_quiescence(world, self.server))
                .flatten()
        })
    }

    fn fingerprint(&mut self, world: &World, used: usize) -> u64 {
        let dump: Vec<String> = redis::cmd("EVAL")
            .arg(DUMP)
            .arg(0)
            .query(self.server.connection())
            .unwrap();
        let mut hasher = DefaultHasher::new();
        dump.hash(&mut hasher);
        format!("{:?}", world.clients).hash(&mut hasher);
        world.in_flight.hash(&mut hasher);
        (self.server.now_ms(), used, world.wakeups_lost).hash(&mut hasher);
        hasher.finish()
    }

    /// Every path up to `bound.depth`, then the random walks.
    pub(crate) fn run(mut self, bound: &Bound) -> Report {
        let started = Instant::now();
        let (mut world, _, _) = self.replay(&[], bound.faults);
        let mut path = Vec::new();
        if let Some(finding) = self.dfs(&mut world, &mut path, 0, bound) {
            self.report.finding = Some(finding);
        }
        if self.report.finding.is_none() {
            for walk in 0..bound.walks {
                let seed = bound.seed.wrapping_add(walk as u64);
                self.report.walks += 1;
                if let Some(finding) = self.walk(seed, bound) {
                    self.report.finding = Some(finding);
                    break;
                }
            }
        }
        self.report.elapsed = started.elapsed();
        self.report
    }

    fn finding(
        &self,
        violation: Violation,
        choices: Vec<usize>,
        seed: Option<u64>,
        faults: usize,
        world: &World,
    ) -> Finding {
        Finding {
            violation,
            choices,
            seed,
            faults,
            log: world.to_string(),
        }
    }

    fn dfs(
        &mut self,
        world: &mut World,
        path: &mut Vec<usize>,
        used: usize,
        bound: &Bound,
    ) -> Option<Finding> {
        let depth = path.len();
        let now = self.server.now_ms();
        let steps = choices(world, self.scenario, now, used < bound.faults);
        if depth >= bound.depth || steps.is_empty() {
            self.report.paths += 1;
            return None;
        }
        let fingerprint = self.fingerprint(world, used);
        if self
            .visited
            .get(&fingerprint)
            .is_some_and(|&seen| seen <= depth)
        {
            return None;
        }
        self.visited.insert(fingerprint, depth);
        self.report.states += 1;
        for (choice, &step) in steps.iter().enumerate() {
            if choice > 0 {
                *world = self.replay(path, bound.faults).0;
            }
            path.push(choice);
            world.apply(self.server, step);
            if let Some(violation) = self.check(world, step) {
                return Some(self.finding(violation, path.clone(), None, bound.faults, world));
            }
            let used = used + step.is_fault() as usize;
            if let Some(finding) = self.dfs(world, path, used, bound) {
                return Some(finding);
            }
            path.pop();
        }
        None
    }

    /// One random walk from an empty server, its choices drawn from `seed`.
    pub(crate) fn walk(&mut self, seed: u64, bound: &Bound) -> Option<Finding> {
        let mut rng = XorShift(seed.max(1));
        let mut world = World::new(self.server, self.scenario.mode, &self.scenario.clients);
        let mut path = Vec::new();
        let mut used = 0;
        for _ in 0..bound.walk_depth {
            let now = self.server.now_ms();
            let steps = choices(&world, self.scenario, now, used < bound.walk_faults);
            if steps.is_empty() {
                break;
            }
            let choice = (rng.next() % steps.len() as u64) as usize;
            let step = steps[choice];
            path.push(choice);
            used += step.is_fault() as usize;
            world.apply(self.server, step);
            if let Some(violation) = self.check(&world, step) {
                return Some(self.finding(violation, path, Some(seed), bound.walk_faults, &world));
            }
        }
        self.report.paths += 1;
        None
    }
}

/// A small deterministic generator: a seed replays its walk exactly.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
