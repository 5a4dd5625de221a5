//! `polylock inspect NAME` and `polylock force-unlock NAME`.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;

use crate::error::{CliError, CliResult};
use crate::raw::{self, Kind, LockState};
use crate::{block_on, DEFAULT_URL};

#[derive(Args)]
#[command(after_help = "Examples:
  polylock inspect orders:42
  polylock inspect orders:42 --json | jq .holders
  POLYLOCK_REDIS_URL=redis://cache:6379/2 polylock inspect orders:42

Kinds: plain (a reentrant lock), fair (its queue or timeout set exists; a fair lock nobody
waits for is stored exactly like a plain one and shows as plain), none (no key),
not-a-lock (the name holds another Redis type, or a hash with other fields: exit code 4).")]
pub struct InspectArgs {
    /// The lock name (the Redis key of the lock).
    pub name: String,
    /// Redis URL.
    #[arg(long, env = "POLYLOCK_REDIS_URL", hide_env_values = true, default_value = DEFAULT_URL)]
    pub redis: String,
    /// Print one JSON object instead of text (for scripts).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
#[command(after_help = "Examples:
  polylock force-unlock orders:42          # asks for confirmation
  polylock force-unlock orders:42 --yes    # no question (scripts, CI)

If the fair lock's queue or timeout set exists, the fair force-unlock runs (it wakes the head of
the queue); otherwise the plain one (it publishes the unlock message on the lock's channel).
The holder is not told directly: its next renewal or release reports the lock as lost.")]
pub struct ForceUnlockArgs {
    /// The lock name (the Redis key of the lock).
    pub name: String,
    /// Redis URL.
    #[arg(long, env = "POLYLOCK_REDIS_URL", hide_env_values = true, default_value = DEFAULT_URL)]
    pub redis: String,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

fn not_a_lock(state: &LockState) -> CliError {
    let what = if state.redis_type == "hash" {
        "a hash whose fields are not lock owners".to_owned()
    } else {
        format!("a Redis {}", state.redis_type)
    };
    CliError::NotALock(format!(
        "'{}' is not a lock: the key holds {what}; another program uses this name",
        state.name
    ))
}

pub fn run_inspect(args: InspectArgs) -> CliResult<()> {
    let state = block_on(async {
        let mut connection = raw::connect(&args.redis).await?;
        raw::read_lock(&mut connection, &args.name).await
    })?;
    if args.json {
        let text = serde_json::to_string_pretty(&state)
            .map_err(|err| CliError::Failed(format!("cannot encode JSON: {err}")))?;
        println!("{text}");
    } else {
        print_state(&state);
    }
    if state.kind == Kind::NotALock {
        return Err(not_a_lock(&state));
    }
    Ok(())
}

fn print_state(state: &LockState) {
    println!("lock:   {}", state.name);
    let kind = match state.kind {
        Kind::NotALock => format!("not-a-lock (Redis type: {})", state.redis_type),
        Kind::None if state.queue.is_empty() => "none (no such key: not held)".to_owned(),
        Kind::Fair if !state.is_held() => "fair (not held now)".to_owned(),
        kind => kind.label().to_owned(),
    };
    println!("kind:   {kind}");
    if state.kind == Kind::NotALock {
        return;
    }
    if state.holders.is_empty() {
        println!("holders: none");
    } else {
        println!("holders:");
        for holder in &state.holders {
            println!("  {}  (hold count {})", holder.owner, holder.count);
        }
        let lease = match state.remaining_lease_ms {
            Some(ms) => raw::seconds(ms),
            None if !state.expires => "no expiry (not written by polylock or Redisson)".to_owned(),
            None => "-".to_owned(),
        };
        println!("lease:  {lease} remaining");
    }
    if state.kind == Kind::Fair {
        if state.queue.is_empty() {
            println!("queue:  empty");
        } else {
            println!("queue:  {} waiting, in order:", state.queue.len());
            for (place, waiter) in state.queue.iter().enumerate() {
                let deadline = match waiter.deadline_in_ms {
                    Some(ms) if ms >= 0 => {
                        format!("skipped if silent for {}", raw::seconds(ms as u64))
                    }
                    Some(_) => "deadline passed (stale, removed on next operation)".to_owned(),
                    None => "no deadline recorded".to_owned(),
                };
                println!("  {}. {}  ({deadline})", place + 1, waiter.owner);
            }
        }
    }
}

/// Asks on the terminal; anything but y/yes is a no.
fn confirm(question: &str) -> CliResult<bool> {
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|err| CliError::Failed(format!("cannot read the answer: {err}")))?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

pub fn run_force_unlock(args: ForceUnlockArgs) -> CliResult<()> {
    if !args.yes && !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "force-unlock '{}' needs --yes when stdin is not a terminal",
            args.name
        )));
    }
    let state = block_on(async {
        let mut connection = raw::connect(&args.redis).await?;
        raw::read_lock(&mut connection, &args.name).await
    })?;
    match state.kind {
        Kind::NotALock => return Err(not_a_lock(&state)),
        Kind::None | Kind::Fair | Kind::Plain if !state.is_held() => {
            println!("'{}' is not locked; nothing to do", args.name);
            return Ok(());
        }
        _ => {}
    }
    let owners: Vec<&str> = state.holders.iter().map(|h| h.owner.as_str()).collect();
    if !args.yes {
        let question = format!(
            "Force-unlock {} lock '{}' held by {}?",
            state.kind.label(),
            args.name,
            owners.join(", ")
        );
        if !confirm(&question)? {
            return Err(CliError::Failed(
                "not confirmed; the lock is unchanged".into(),
            ));
        }
    }
    let deleted = block_on(async {
        let client = polylock::Client::connect(&args.redis).await?;
        let lock = if state.kind == Kind::Fair {
            client.fair_lock(&args.name)?
        } else {
            client.lock(&args.name)?
        };
        let deleted = lock.force_unlock().await;
        client.close();
        deleted
    })?;
    if deleted {
        println!(
            "force-unlocked {} lock '{}' (was held by {})",
            state.kind.label(),
            args.name,
            owners.join(", ")
        );
    } else {
        println!("'{}' was released meanwhile; nothing to do", args.name);
    }
    Ok(())
}
