//! The demo's private redis-server: a free loopback port, no persistence, stopped on drop.

use std::io::BufReader;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::signals;
use polylock_cli_common::error::{CliError, CliResult};

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

/// Whether our own child answers on `port`: a PONG, and INFO's `process_id` is the child's. The
/// port was free when picked, but another process may have taken it since; then our child
/// fails to bind and the demo must not run on the stranger's server.
fn answers_as(port: u16, child: u32) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
        return false;
    };
    let Ok(mut connection) = client.get_connection_with_timeout(Duration::from_secs(1)) else {
        return false;
    };
    let _ = connection.set_read_timeout(Some(Duration::from_secs(1)));
    let info: redis::RedisResult<String> = redis::cmd("INFO").arg("server").query(&mut connection);
    info.is_ok_and(|info| {
        info.lines()
            .find_map(|line| line.trim().strip_prefix("process_id:"))
            .is_some_and(|pid| pid == child.to_string())
    })
}

impl EmbeddedRedis {
    pub fn start() -> CliResult<EmbeddedRedis> {
        let program = server_program()?;
        let mut last_error = String::from("it exited at once");
        // A port free a moment ago can be taken meanwhile: try a few.
        for _ in 0..5 {
            match Self::start_on(&program, free_port()?)? {
                Ok(server) => return Ok(server),
                Err(error) => last_error = error,
            }
        }
        Err(CliError::Failed(format!(
            "the private redis-server ({}) did not start: {last_error}",
            program.display()
        )))
    }

    /// Starts the server on `port`: `Ok(Err(why))` when it did not come up there (the caller
    /// tries another port).
    fn start_on(program: &Path, port: u16) -> CliResult<Result<EmbeddedRedis, String>> {
        let dir = std::env::temp_dir().join(format!("polylock-demo-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|err| CliError::Failed(format!("cannot create {}: {err}", dir.display())))?;
        let mut command = Command::new(program);
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
            if answers_as(port, server.child.id()) {
                return Ok(Ok(server));
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let mut stderr = String::new();
                if let Some(pipe) = server.child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut BufReader::new(pipe), &mut stderr);
                }
                return Ok(Err(format!("it exited with {status}: {}", stderr.trim())));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Err("it did not answer within 10 s".into()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_server_is_not_started_on_a_port_another_server_took_meanwhile() {
        let stranger = polylock_testkit::RedisServer::start();
        let started = EmbeddedRedis::start_on(&server_program().unwrap(), stranger.port())
            .expect("the launch itself works");
        let error = started
            .err()
            .expect("the stranger's server was taken for the demo's");
        assert!(error.starts_with("it exited with"), "{error}");
        assert_eq!(stranger.command(&["PING"]).as_deref(), Some("+PONG"));
    }
}
