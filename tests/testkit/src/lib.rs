//! Real `redis-server` processes for tests: each on a free loopback port, in a temporary
//! directory, without persistence, stopped (killed) when dropped. The binary is
//! `POLYLOCK_REDIS_SERVER` (default `redis-server`, see [`server_program`]). [`FaultProxy`]
//! sits between a client and a server to inject network faults. [`run_tool`] runs a command-line
//! tool to its end within a bound.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::ConnectionLike;

mod bounded;
pub mod cluster;
mod monitor;
mod proxy;
pub mod redisson;
pub mod sentinel;
mod server_build;
mod tls;

pub use bounded::{run_tool, Output};
pub use cluster::Cluster;
pub use monitor::{quoted_args, Monitor};
pub use proxy::{Fault, FaultProxy};
pub use sentinel::SentinelSet;
pub use server_build::{cli_program, server_program, tls_server_program, ServerBuild};
pub use tls::TlsFiles;

/// How long `command` waits to connect and for a reply.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// One running redis-server.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    /// The `--option value` arguments it was started with, for `restart`.
    extra: Vec<String>,
    /// The server binary (`tls_server_program` for `start_tls`, else `server_program`).
    program: String,
    /// A sentinel: the lines of its configuration file (written before its first start).
    sentinel: Option<Vec<String>>,
    /// The port it also serves TLS on (`start_tls`).
    tls_port: Option<u16>,
    child: Option<Child>,
}

/// How long a topology change (a new cluster, a failover, a moved slot) may take. A Sentinel
/// whose timer saw the process stall (a loaded machine) enters TILT mode and does nothing for
/// 30 s, a forced failover included: the bound leaves room for one TILT.
const SETTLE: Duration = Duration::from_secs(90);

/// Polls `done` until it succeeds; panics after [`SETTLE`] with what it waited for and what it
/// saw last.
pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + SETTLE;
    loop {
        match done() {
            Ok(()) => return,
            Err(seen) if Instant::now() > deadline => {
                panic!("gave up waiting for {what}; last seen: {seen}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// A port the OS says is free now (a race with other processes is retried by `start`).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("no free loopback port")
}

/// The process id the server on loopback `port` reports (`process_id` of INFO server), or
/// `None` when INFO cannot be read: how a launcher tells its own child from a server of another
/// process that took the port first.
pub fn server_pid(port: u16) -> Option<u32> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let mut connection = client.get_connection_with_timeout(COMMAND_TIMEOUT).ok()?;
    connection.set_read_timeout(Some(COMMAND_TIMEOUT)).ok()?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut connection)
        .ok()?;
    info.lines()
        .find_map(|line| line.trim().strip_prefix("process_id:"))
        .and_then(|pid| pid.parse().ok())
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Starts a server with extra `--option value` arguments.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        for _ in 0..5 {
            let port = free_port();
            if let Some(server) = Self::start_on(port, extra) {
                return server;
            }
        }
        panic!("redis-server did not start; is it installed (apt-get install redis-server)?");
    }

    /// Starts a server of the binary `program` (not [`server_program`]) on a free port: a test
    /// that runs every server of the matrix in turn.
    pub fn start_program(program: &str, extra: &[&str]) -> RedisServer {
        for _ in 0..5 {
            if let Some(server) = Self::launch_on(free_port(), extra, program.to_owned()) {
                return server;
            }
        }
        panic!("{program} did not start");
    }

    /// Starts a server that also serves TLS on a free port (`tls_url`), with the certificate
    /// `cert`/`key` and trusting `ca` for client certificates, which it requires when
    /// `auth_clients`. Its plain port stays open on loopback for the kit's own checks.
    pub fn start_tls(files: &TlsFiles, cert: &str, auth_clients: bool) -> RedisServer {
        Self::start_tls_with(files, cert, auth_clients, &[])
    }

    /// As [`RedisServer::start_tls`], with extra `--option value` arguments (a cluster node's).
    /// Its own outgoing connections (replication, cluster bus, a sentinel's) use TLS when the
    /// arguments ask for it (`--tls-replication yes`, `--tls-cluster yes`) and present the
    /// client certificate, as a server that requires one wants.
    pub fn start_tls_with(
        files: &TlsFiles,
        cert: &str,
        auth_clients: bool,
        extra: &[&str],
    ) -> RedisServer {
        for _ in 0..5 {
            let tls_port = free_port().to_string();
            let mut args: Vec<String> = vec!["--tls-port".into(), tls_port.clone()];
            args.extend(tls_arguments(files, cert, auth_clients));
            args.extend(extra.iter().map(|arg| arg.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Some(mut server) = Self::launch_on(free_port(), &args, tls_server_program()) {
                server.tls_port = tls_port.parse().ok();
                return server;
            }
        }
        panic!(
            "{} with TLS did not start; was it built with TLS (BUILD_TLS=yes)? \
             POLYLOCK_REDIS_TLS_SERVER names one that was",
            tls_server_program()
        );
    }

    /// The port it serves TLS on (started with `start_tls`, `start_tls_with` or
    /// `start_sentinel_tls`).
    pub fn tls_port(&self) -> Option<u16> {
        self.tls_port
    }

    /// The `rediss://` URL of a server started by `start_tls`.
    pub fn tls_url(&self) -> String {
        let port = self.tls_port.expect("not started with start_tls");
        format!("rediss://127.0.0.1:{port}")
    }

    /// Starts a server on `port` (used to restart one in place). `None` if it did not come up.
    pub fn start_on(port: u16, extra: &[&str]) -> Option<RedisServer> {
        Self::launch_on(port, extra, server_program())
    }

    fn launch_on(port: u16, extra: &[&str], program: String) -> Option<RedisServer> {
        let dir =
            std::env::temp_dir().join(format!("polylock-redis-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let mut server = RedisServer {
            port,
            dir,
            extra: extra.iter().map(|arg| arg.to_string()).collect(),
            program,
            sentinel: None,
            tls_port: None,
            child: None,
        };
        server.launch().then_some(server)
    }

    /// Starts a Sentinel on a free port with these configuration lines (`sentinel monitor
    /// ...`); it rewrites its file as it learns the topology.
    pub fn start_sentinel(config: &[&str]) -> RedisServer {
        Self::launch_sentinel(config, server_program())
    }

    fn launch_sentinel(config: &[&str], program: String) -> RedisServer {
        for _ in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir()
                .join(format!("polylock-sentinel-{port}-{}", std::process::id()));
            if std::fs::create_dir_all(&dir).is_err() {
                continue;
            }
            let mut server = RedisServer {
                port,
                dir,
                extra: Vec::new(),
                program: program.clone(),
                sentinel: Some(config.iter().map(|line| line.to_string()).collect()),
                tls_port: None,
                child: None,
            };
            if server.launch() {
                return server;
            }
        }
        panic!("redis-server --sentinel did not start");
    }

    /// As [`RedisServer::start_sentinel`], also serving TLS on a free port (`tls_port`) with
    /// the certificate `cert` of `files`, and speaking TLS to the servers it watches and to the
    /// other sentinels (`tls-replication yes`).
    pub fn start_sentinel_tls(
        files: &TlsFiles,
        cert: &str,
        auth_clients: bool,
        config: &[&str],
    ) -> RedisServer {
        let tls_port = free_port();
        let mut lines = vec![format!("tls-port {tls_port}"), "tls-replication yes".into()];
        for pair in tls_arguments(files, cert, auth_clients).chunks(2) {
            lines.push(format!("{} {}", pair[0].trim_start_matches("--"), pair[1]));
        }
        lines.extend(config.iter().map(|line| line.to_string()));
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut server = Self::launch_sentinel(&lines, tls_server_program());
        server.tls_port = Some(tls_port);
        server
    }

    /// True until killed.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The process id of the running server (`None` once killed or stopped).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The directory it runs in (its `nodes.conf`, a sentinel's configuration file).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Stops the server cleanly (`SHUTDOWN NOSAVE`, as an operator would), killing it if it
    /// has not exited after 5 s. `restart` starts it again.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // The reply never comes: the connection closes as the server exits.
        let _ = self.command(&["SHUTDOWN", "NOSAVE"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Spawns redis-server with this server's port, directory and arguments and waits until
    /// it answers PING; false if it exited (port taken) or never answered.
    fn launch(&mut self) -> bool {
        let port_text = self.port.to_string();
        let config = self.dir.join("sentinel.conf");
        if let Some(lines) = &self.sentinel {
            if !config.exists() && std::fs::write(&config, lines.join("\n") + "\n").is_err() {
                return false;
            }
        }
        let mut args = vec![
            "--port",
            &port_text,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ];
        args.extend(self.extra.iter().map(String::as_str));
        let config_text = config.to_string_lossy().into_owned();
        if self.sentinel.is_some() {
            // Sentinels keep no data: only the port, address and their own file.
            args = vec![
                &config_text,
                "--sentinel",
                "--port",
                &port_text,
                "--bind",
                "127.0.0.1",
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
            ];
        }
        let Ok(child) = Command::new(&self.program)
            .args(&args)
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        else {
            return false;
        };
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            // The port was free when picked, but another process may have taken it since: a
            // PONG counts only when it comes from our own child, else the caller would run its
            // test against a stranger's server while our child fails to bind.
            if self.command(&["PING"]).as_deref() == Some("+PONG") && self.answers_as_child() {
                return true;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    self.child = None;
                    return false;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        false
    }

    /// Whether the server on our port is our child process ([`server_pid`]). A server whose
    /// INFO cannot be read (a test may rename it) is taken at its PONG, as before the check.
    fn answers_as_child(&self) -> bool {
        let Some(child) = self.child.as_ref() else {
            return false;
        };
        server_pid(self.port).is_none_or(|pid| pid == child.id())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A new connection to this server (redis crate, sync API) that gives up on connecting
    /// or on a reply after 5 s.
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let connection = client.get_connection_with_timeout(COMMAND_TIMEOUT)?;
        connection.set_read_timeout(Some(COMMAND_TIMEOUT))?;
        connection.set_write_timeout(Some(COMMAND_TIMEOUT))?;
        Ok(connection)
    }

    /// Sends one command on a new connection and returns the reply as its first RESP line
    /// would read: `+OK`, `:1`, `-ERR ...`, `*3`; a bulk string as its text, `$-1` for nil.
    /// `None` if the server could not be reached or did not answer.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let (name, rest) = args.split_first()?;
        let mut command = redis::cmd(name);
        for arg in rest {
            command.arg(*arg);
        }
        // `req_command` hands back server errors as values, so they can be shown too.
        let reply = self.connection().ok()?.req_command(&command).ok()?;
        Some(reply_line(&reply))
    }

    /// The integer of an integer reply (`:N`), or panics with what came back.
    pub fn int(&self, args: &[&str]) -> i64 {
        let reply = self.command(args).unwrap_or_default();
        reply
            .strip_prefix(':')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{args:?} gave {reply:?}, not an integer"))
    }

    /// Makes the server hold every client's commands for `duration` (CLIENT PAUSE ... ALL),
    /// as a server stalled by a slow command or a fork would.
    pub fn pause(&self, duration: Duration) {
        let millis = duration.as_millis().to_string();
        let reply = self.command(&["CLIENT", "PAUSE", &millis, "ALL"]);
        assert_eq!(reply.as_deref(), Some("+OK"), "CLIENT PAUSE {millis} ALL");
    }

    /// Closes every client connection of one kind (`normal`, `pubsub`, `replica`, `master`)
    /// from the server side (CLIENT KILL TYPE); returns how many were closed. The connection
    /// sending the command is spared.
    pub fn kill_clients(&self, kind: &str) -> i64 {
        self.int(&["CLIENT", "KILL", "TYPE", kind])
    }

    /// Kills the server at once (no shutdown save), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts it again on the same port with the same arguments (its
    /// data is gone: nothing is persisted). Panics if it does not come back.
    pub fn restart(&mut self) {
        self.kill();
        // The port may stay busy for a moment after the kill.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.launch() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not restart on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The TLS arguments of a server with certificate `cert` of `files`: it trusts the test CA for
/// client certificates (required when `auth_clients`) and presents the client certificate on
/// its own outgoing TLS connections.
fn tls_arguments(files: &TlsFiles, cert: &str, auth_clients: bool) -> Vec<String> {
    [
        ("--tls-cert-file", files.path(&format!("{cert}.crt"))),
        ("--tls-key-file", files.path(&format!("{cert}.key"))),
        ("--tls-ca-cert-file", files.path("ca.crt")),
        (
            "--tls-auth-clients",
            if auth_clients { "yes" } else { "no" }.to_owned(),
        ),
        ("--tls-client-cert-file", files.path("client.crt")),
        ("--tls-client-key-file", files.path("client.key")),
    ]
    .into_iter()
    .flat_map(|(option, value)| [option.to_owned(), value])
    .collect()
}

/// A reply written as its first RESP line (a bulk string as its text).
fn reply_line(reply: &redis::Value) -> String {
    use redis::Value;
    match reply {
        Value::Okay => "+OK".to_owned(),
        Value::SimpleString(text) => format!("+{text}"),
        Value::Int(number) => format!(":{number}"),
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::Nil => "$-1".to_owned(),
        Value::Array(items) | Value::Set(items) => format!("*{}", items.len()),
        Value::ServerError(err) => match err.details() {
            Some(details) => format!("-{} {details}", err.code()),
            None => format!("-{}", err.code()),
        },
        other => format!("{other:?}"),
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
