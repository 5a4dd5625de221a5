//! Real `redis-server` processes for tests: each on a free loopback port, in a temporary
//! directory, without persistence, stopped (killed) when dropped. [`FaultProxy`] sits between
//! a client and a server to inject network faults. Multi-server topologies built of them:
//! [`start_many`] (independent servers), [`RedisCluster`] and [`RedisSentinel`].

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::ConnectionLike;

mod cluster;
mod proxy;
mod sentinel;
mod wait;

pub use cluster::{ClusterNode, RedisCluster, Role};
pub use proxy::{Fault, FaultProxy};
pub use sentinel::RedisSentinel;
pub use wait::{wait_for, WAIT_TIMEOUT};

/// How long `command` waits to connect and for a reply.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// One running redis-server.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    /// The `--option value` arguments it was started with, for `restart`.
    extra: Vec<String>,
    /// The config file it was started with (first argument), if any: a sentinel needs one it
    /// can rewrite.
    config_file: Option<PathBuf>,
    child: Option<Child>,
}

/// A port the OS says is free now (a race with other processes is retried by `start`).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("no free loopback port")
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Starts a server with extra `--option value` arguments.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        Self::start_with_config(None, extra)
    }

    /// Starts a server that reads `config` (the text of a config file written into its
    /// directory, e.g. a sentinel's) and then extra `--option value` arguments.
    pub fn start_with_config(config: Option<&str>, extra: &[&str]) -> RedisServer {
        for _ in 0..5 {
            let port = free_port();
            if let Some(server) = Self::start_on_with_config(port, config, extra) {
                return server;
            }
        }
        panic!("redis-server did not start; is it installed (apt-get install redis-server)?");
    }

    /// Starts a server on `port` (used to restart one in place). `None` if it did not come up.
    pub fn start_on(port: u16, extra: &[&str]) -> Option<RedisServer> {
        Self::start_on_with_config(port, None, extra)
    }

    fn start_on_with_config(
        port: u16,
        config: Option<&str>,
        extra: &[&str],
    ) -> Option<RedisServer> {
        let dir =
            std::env::temp_dir().join(format!("polylock-redis-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let config_file = match config {
            Some(text) => {
                let file = dir.join("redis.conf");
                std::fs::write(&file, text).ok()?;
                Some(file)
            }
            None => None,
        };
        let mut server = RedisServer {
            port,
            dir,
            extra: extra.iter().map(|arg| arg.to_string()).collect(),
            config_file,
            child: None,
        };
        server.launch().then_some(server)
    }

    /// Spawns redis-server with this server's port, directory and arguments and waits until
    /// it answers PING; false if it exited (port taken) or never answered.
    fn launch(&mut self) -> bool {
        let port_text = self.port.to_string();
        let mut args: Vec<&str> = self
            .config_file
            .iter()
            .filter_map(|file| file.to_str())
            .collect();
        args.extend([
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
        ]);
        args.extend(self.extra.iter().map(String::as_str));
        let Ok(child) = Command::new("redis-server")
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
            if self.command(&["PING"]).as_deref() == Some("+PONG") {
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

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Whether the process is still running (false after `kill` or a crash).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Runs one command on a new connection and converts the reply, e.g.
    /// `server.query::<String>(redis::cmd("CLUSTER").arg("NODES"))`.
    pub fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> redis::RedisResult<T> {
        command.query(&mut self.connection()?)
    }

    /// The `field:value` lines of `INFO <section>` as pairs; empty if the server did not answer.
    pub fn info(&self, section: &str) -> std::collections::HashMap<String, String> {
        let text: String = self
            .query(redis::cmd("INFO").arg(section))
            .unwrap_or_default();
        text.lines()
            .filter_map(|line| line.trim_end().split_once(':'))
            .map(|(field, value)| (field.to_owned(), value.to_owned()))
            .collect()
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

/// `count` independent servers (e.g. for a RedLock over 3 or 5 masters).
pub fn start_many(count: usize) -> Vec<RedisServer> {
    (0..count).map(|_| RedisServer::start()).collect()
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
