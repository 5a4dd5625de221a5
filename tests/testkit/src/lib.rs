//! Real `redis-server` processes for tests: each on a free loopback port, in a temporary
//! directory, without persistence, stopped (killed) when dropped.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One running redis-server.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
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
        for _ in 0..5 {
            let port = free_port();
            if let Some(server) = Self::start_on(port, extra) {
                return server;
            }
        }
        panic!("redis-server did not start; is it installed (apt-get install redis-server)?");
    }

    /// Starts a server on `port` (used to restart one in place). `None` if it did not come up.
    pub fn start_on(port: u16, extra: &[&str]) -> Option<RedisServer> {
        let dir =
            std::env::temp_dir().join(format!("polylock-redis-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let port_text = port.to_string();
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
        args.extend_from_slice(extra);
        let child = Command::new("redis-server")
            .args(&args)
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut server = RedisServer {
            port,
            dir,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if server.command(&["PING"]).as_deref() == Some("+PONG") {
                return Some(server);
            }
            if let Some(child) = server.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    return None; // exited: port taken
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Sends one command (inline RESP) and returns the first reply line, e.g. `+OK`, `:1`.
    /// For bulk replies, the line after the length is returned (`$-1` for nil).
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream.write_all(request.as_bytes()).ok()?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end().to_owned();
        if line.starts_with('$') && line != "$-1" {
            let mut value = String::new();
            reader.read_line(&mut value).ok()?;
            return Some(value.trim_end().to_owned());
        }
        Some(line)
    }

    /// The integer of an integer reply (`:N`), or panics with what came back.
    pub fn int(&self, args: &[&str]) -> i64 {
        let reply = self.command(args).unwrap_or_default();
        reply
            .strip_prefix(':')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{args:?} gave {reply:?}, not an integer"))
    }

    /// Kills the server at once (no shutdown save), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
