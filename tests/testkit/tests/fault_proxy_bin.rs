//! The `polylock-fault-proxy` binary's line protocol, as the Python and Node suites use it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use polylock_testkit::RedisServer;

struct ProxyProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    port: u16,
}

impl ProxyProcess {
    fn start(upstream: u16) -> ProxyProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_polylock-fault-proxy"))
            .args(["--upstream", &upstream.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start polylock-fault-proxy");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let port = first
            .trim_end()
            .strip_prefix("listening ")
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("first line {first:?}"));
        ProxyProcess {
            child,
            stdin,
            stdout,
            port,
        }
    }

    fn send(&mut self, line: &str) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        answer.trim_end().to_owned()
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let connection = redis::Client::open(format!("redis://127.0.0.1:{port}"))?
        .get_connection_with_timeout(Duration::from_secs(2))?;
    connection.set_read_timeout(Some(Duration::from_millis(400)))?;
    Ok(connection)
}

#[test]
fn commands_switch_faults_and_answer_ok() {
    let server = RedisServer::start();
    let mut proxy = ProxyProcess::start(server.port());
    let mut connection = connect(proxy.port).unwrap();
    assert_eq!(proxy.send("connections"), "ok 1");

    assert_eq!(proxy.send("drop-replies"), "ok");
    let err = redis::cmd("SET")
        .arg("bin:key")
        .arg("v")
        .exec(&mut connection)
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert_eq!(server.command(&["GET", "bin:key"]).as_deref(), Some("v"));

    assert_eq!(proxy.send("cut"), "ok");
    assert_eq!(proxy.send("connections"), "ok 0");
    assert_eq!(proxy.send("refuse"), "ok");
    assert!(connect(proxy.port)
        .map(|_| ())
        .unwrap_err()
        .is_connection_refusal());
    assert_eq!(proxy.send("pass"), "ok");
    let mut connection = connect(proxy.port).unwrap();
    assert_eq!(
        redis::cmd("PING").query::<String>(&mut connection).unwrap(),
        "PONG"
    );

    for line in [
        "delay 20",
        "blackhole",
        "cut-after-forward",
        "refuse-for 50",
    ] {
        assert_eq!(proxy.send(line), "ok", "{line}");
    }
}

#[test]
fn bad_commands_answer_an_error_and_the_proxy_keeps_going() {
    let server = RedisServer::start();
    let mut proxy = ProxyProcess::start(server.port());
    for line in ["jump", "delay", "delay soon", "pass now", "delay 1 2", ""] {
        let answer = proxy.send(line);
        assert!(answer.starts_with("error "), "{line:?} gave {answer:?}");
    }
    assert_eq!(proxy.send("connections"), "ok 0");
}

#[test]
fn closing_stdin_stops_the_proxy() {
    let server = RedisServer::start();
    let mut proxy = ProxyProcess::start(server.port());
    let _open = connect(proxy.port).unwrap();
    drop(proxy.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = proxy.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status}");
    assert!(connect(proxy.port)
        .map(|_| ())
        .unwrap_err()
        .is_connection_refusal());
}

#[test]
fn a_missing_upstream_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_polylock-fault-proxy"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--upstream PORT"));
}
