//! The test kit's `FaultProxy` for the Python and Node suites, driven over stdin/stdout.
//!
//! Usage: `polylock-fault-proxy --upstream PORT`. Prints `listening <port>`, then answers
//! each command line with `ok` (`ok <n>` for `connections`) or `error <why>`:
//! `pass`, `delay <ms>`, `drop-replies`, `blackhole`, `cut-after-forward`, `refuse`,
//! `refuse-for <ms>`, `cut`, `connections`. Stops when stdin closes, so a test killed
//! mid-way never leaves a proxy behind.

use std::io::{self, BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

use polylock_testkit::{Fault, FaultProxy};

const USAGE: &str = "usage: polylock-fault-proxy --upstream PORT";

fn main() -> ExitCode {
    let upstream = match upstream_port(std::env::args().skip(1)) {
        Ok(port) => port,
        Err(why) => {
            eprintln!("{why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let proxy = FaultProxy::start(upstream);
    let mut stdout = io::stdout().lock();
    if writeln!(stdout, "listening {}", proxy.port())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let reply = match run(&proxy, line.trim()) {
            Ok(answer) => answer,
            Err(why) => format!("error {why}"),
        };
        if writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    ExitCode::SUCCESS
}

fn upstream_port(mut args: impl Iterator<Item = String>) -> Result<u16, String> {
    match (args.next().as_deref(), args.next(), args.next()) {
        (Some("--upstream"), Some(port), None) => port
            .parse()
            .map_err(|_| format!("--upstream {port:?} is not a port number")),
        _ => Err("expected exactly --upstream PORT".to_owned()),
    }
}

/// Carries out one command line; the answer to print, or why it failed.
fn run(proxy: &FaultProxy, line: &str) -> Result<String, String> {
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or("");
    let millis = |word: Option<&str>| -> Result<Duration, String> {
        let word = word.ok_or_else(|| format!("{verb} needs a duration in milliseconds"))?;
        word.parse()
            .map(Duration::from_millis)
            .map_err(|_| format!("{word:?} is not a number of milliseconds"))
    };
    let argument = words.next();
    if words.next().is_some() {
        return Err(format!("too many arguments: {line:?}"));
    }
    let fault = match (verb, argument) {
        ("pass", None) => Fault::Pass,
        ("delay", _) => Fault::Delay(millis(argument)?),
        ("drop-replies", None) => Fault::DropReplies,
        ("blackhole", None) => Fault::BlackHole,
        ("cut-after-forward", None) => Fault::CutAfterForward,
        ("refuse", None) => Fault::Refuse,
        ("refuse-for", _) => {
            proxy.refuse_for(millis(argument)?);
            return Ok("ok".to_owned());
        }
        ("cut", None) => {
            proxy.cut();
            return Ok("ok".to_owned());
        }
        ("connections", None) => return Ok(format!("ok {}", proxy.connections())),
        (
            "pass" | "drop-replies" | "blackhole" | "cut-after-forward" | "refuse" | "cut"
            | "connections",
            Some(_),
        ) => return Err(format!("{verb} takes no argument")),
        _ => return Err(format!("unknown command {line:?}")),
    };
    proxy.try_set(fault).map_err(|err| err.to_string())?;
    Ok("ok".to_owned())
}
