//! `MONITOR` on a test server: every command it runs, as the server shows it, collected on a
//! thread until the monitor is dropped.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};

use crate::RedisServer;

/// The lines `MONITOR` showed so far (`+<time> [<db> <client>] "CMD" "arg" ...`; a script's
/// commands show `lua` as their client).
pub struct Monitor {
    lines: Arc<Mutex<Vec<String>>>,
    stream: TcpStream,
}

impl Monitor {
    /// Starts monitoring: every command the server runs after this returns is collected.
    pub fn start(server: &RedisServer) -> Monitor {
        let mut stream = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        stream.write_all(b"MONITOR\r\n").unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut ok = String::new();
        reader.read_line(&mut ok).unwrap();
        assert_eq!(ok.trim(), "+OK");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let seen = lines.clone();
        std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { break };
                seen.lock().unwrap().push(line);
            }
        });
        Monitor { lines, stream }
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// How many lines so far: a mark for [`Monitor::client_commands_since`].
    pub fn count(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    /// The commands clients (not scripts) sent since line `mark`, each as its arguments,
    /// the command lower-cased.
    pub fn client_commands_since(&self, mark: usize) -> Vec<Vec<String>> {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .skip(mark)
            .filter(|line| !line.contains(" lua] "))
            .filter_map(|line| line.find("] ").map(|start| quoted_args(&line[start + 2..])))
            .filter(|args| !args.is_empty())
            .map(|mut args| {
                args[0] = args[0].to_ascii_lowercase();
                args
            })
            .collect()
    }

    /// Whether a lock waiter of `owner` went to sleep since line `mark`: after its look listed
    /// it, it subscribed and read that it is still listed (`nothing_missed`, whose last command
    /// is the client's ZSCORE of its place; a look's commands are in scripts). A release before
    /// that read makes the waiter look again, and take the lock without being woken or granted
    /// it: a test of hand-offs releases only once this holds.
    pub fn waiter_asleep(&self, mark: usize, owner: &str) -> bool {
        self.client_commands_since(mark).iter().any(|command| {
            command[0] == "zscore" && command.get(2).map(String::as_str) == Some(owner)
        })
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// The double-quoted arguments of a `MONITOR` line, unescaped enough for key names.
pub fn quoted_args(text: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut arg = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => arg.push(chars.next().unwrap_or('\\')),
                '"' => break,
                c => arg.push(c),
            }
        }
        args.push(arg);
    }
    args
}
