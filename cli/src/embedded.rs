//! The demo's private redis-server: a free loopback port, no persistence, stopped on drop.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{CliError, CliResult};
use crate::signals;

pub struct EmbeddedRedis {
    port: u16,
    dir: PathBuf,
    child: Child,
}

fn free_port() -> CliResult<u16> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|err| CliError::Failed(format!("no free loopback port: {err}")))
}

/// `POLYLOCK_REDIS_SERVER`, else `redis-server` from PATH.
fn server_program() -> CliResult<PathBuf> {
    if let Some(program) = std::env::var_os("POLYLOCK_REDIS_SERVER") {
        return Ok(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            CliError::Failed(
                "redis-server was not found in PATH; the demo starts a private one. Install it \
                 (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis; \
                 or `make demo`, which installs it), or pass --redis URL of a running server"
                    .into(),
            )
        })
}

fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).is_ok() && line.starts_with("+PONG")
}

impl EmbeddedRedis {
    pub fn start() -> CliResult<EmbeddedRedis> {
        let program = server_program()?;
        let mut last_error = String::from("it exited at once");
        // A port free a moment ago can be taken meanwhile: try a few.
        for _ in 0..5 {
            let port = free_port()?;
            let dir =
                std::env::temp_dir().join(format!("polylock-demo-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|err| {
                CliError::Failed(format!("cannot create {}: {err}", dir.display()))
            })?;
            let mut command = Command::new(&program);
            command
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--loglevel", "warning"])
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            signals::die_with_parent(&mut command);
            let child = command.spawn().map_err(|err| {
                CliError::Failed(format!("cannot start {}: {err}", program.display()))
            })?;
            let mut server = EmbeddedRedis { port, dir, child };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if ping(port) {
                    return Ok(server);
                }
                if let Ok(Some(status)) = server.child.try_wait() {
                    let mut stderr = String::new();
                    if let Some(pipe) = server.child.stderr.take() {
                        let _ =
                            std::io::Read::read_to_string(&mut BufReader::new(pipe), &mut stderr);
                    }
                    last_error = format!("it exited with {status}: {}", stderr.trim());
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Err(CliError::Failed(format!(
            "the private redis-server ({}) did not start: {last_error}",
            program.display()
        )))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for EmbeddedRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
