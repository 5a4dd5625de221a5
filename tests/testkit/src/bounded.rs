//! A command-line tool a test runs to its end within a bound, with its output captured: the
//! tests of `polylock` and `polylock-demo` run them this way.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How a program ended and what it printed.
pub struct Output {
    /// The exit code (-1 when a signal ended it).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program ARGS` with stdin closed (not a terminal) and its output captured, without the
/// variables the tools read a default from (`POLYLOCK_REDIS_URL`, `POLYLOCK_PYTHON`) but with
/// `env`. A run longer than `bound` is killed, and the test fails.
pub fn run_tool(program: &str, args: &[&str], env: &[(&str, &str)], bound: Duration) -> Output {
    let mut command = Command::new(program);
    command
        .args(args)
        .env_remove("POLYLOCK_REDIS_URL")
        .env_remove("POLYLOCK_PYTHON")
        .envs(env.iter().copied());
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {program}: {err}"));
    let mut stdout_pipe = child.stdout.take().expect("stdout");
    let mut stderr_pipe = child.stderr.take().expect("stderr");
    let stdout_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout_pipe.read_to_string(&mut text);
        text
    });
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + bound;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the program") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} {args:?} did not finish within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        code: status.code().unwrap_or(-1),
        stdout: stdout_reader.join().expect("stdout reader"),
        stderr: stderr_reader.join().expect("stderr reader"),
    }
}
