//! The `polylock-testkit` launcher as the other languages' test kits drive it: `up`, its JSON
//! line, control lines, and that stdin EOF or SIGTERM leaves no server or temporary file.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Launcher {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    deployment: Value,
}

impl Launcher {
    fn up(args: &[&str]) -> Launcher {
        let mut child = Command::new(env!("CARGO_BIN_EXE_polylock-testkit"))
            .arg("up")
            .args(args)
            .arg("--json")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start polylock-testkit");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let deployment = read_json(&mut stdout);
        Launcher {
            child,
            stdin,
            stdout,
            deployment,
        }
    }

    fn send(&mut self, line: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        read_json(&mut self.stdout)
    }

    fn nodes(&self) -> &Vec<Value> {
        self.deployment["nodes"].as_array().expect("nodes")
    }

    fn pids(&self) -> Vec<i32> {
        self.nodes()
            .iter()
            .map(|node| node["pid"].as_i64().expect("a running node has a pid") as i32)
            .collect()
    }

    fn dirs(&self) -> Vec<String> {
        let mut dirs: Vec<String> = self
            .nodes()
            .iter()
            .map(|node| node["dir"].as_str().unwrap().to_owned())
            .collect();
        if let Some(tls) = self.deployment["tls"]["dir"].as_str() {
            dirs.push(tls.to_owned());
        }
        dirs
    }

    /// Waits for the launcher to exit; true if it exited successfully.
    fn wait_exit(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.success();
            }
            assert!(Instant::now() < deadline, "the launcher did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_json(stdout: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: line {line:?}"))
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn assert_all_gone(pids: &[i32], dirs: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<&i32> = pids.iter().filter(|&&pid| alive(pid)).collect();
    assert!(left.is_empty(), "servers still running: {left:?}");
    for dir in dirs {
        assert!(!Path::new(dir).exists(), "{dir} was not removed");
    }
}

fn query(url: &str, command: &redis::Cmd) -> redis::RedisResult<redis::Value> {
    let client = redis::Client::open(url)?;
    let mut connection = client.get_connection_with_timeout(Duration::from_secs(5))?;
    command.query(&mut connection)
}

fn ping(url: &str) -> bool {
    matches!(query(url, &redis::cmd("PING")), Ok(redis::Value::SimpleString(pong)) if pong == "PONG")
}

fn string(value: &Value) -> &str {
    value.as_str().expect("a string")
}

#[test]
fn single_connects_restarts_and_stops_everything_on_stdin_eof() {
    let mut launcher = Launcher::up(&[
        "single",
        "--count",
        "2",
        "--acl-user",
        "reader on >secret ~* +get +ping",
    ]);
    let deployment = launcher.deployment.clone();
    assert_eq!(deployment["kind"], "single");
    assert_eq!(launcher.nodes().len(), 2);
    assert!(ping(string(&deployment["url"])));
    let first = &launcher.nodes()[0];
    assert_eq!(first["name"], "node0");
    assert_eq!(deployment["url"], first["url"]);
    assert_eq!(
        string(&first["url"]),
        format!("redis://127.0.0.1:{}", first["port"])
    );
    let user = &deployment["acl_users"][0];
    assert_eq!(
        (user["name"].as_str(), user["password"].as_str()),
        (Some("reader"), Some("secret"))
    );
    let port = first["port"].as_u64().unwrap();
    for node in launcher.nodes() {
        let as_reader = format!("redis://reader:secret@127.0.0.1:{}", node["port"]);
        assert!(ping(&as_reader), "the ACL user on {}", node["name"]);
        assert!(query(&as_reader, redis::cmd("SET").arg("k").arg("v")).is_err());
    }

    query(string(&first["url"]), redis::cmd("SET").arg("k").arg("v")).unwrap();
    let old_pid = first["pid"].as_i64().unwrap() as i32;
    let reply = launcher.send("restart node0");
    assert_eq!(reply["ok"], true, "{reply}");
    let new_pid = reply["node"]["pid"].as_i64().unwrap() as i32;
    assert_ne!(new_pid, old_pid);
    assert!(!alive(old_pid));
    assert_eq!(reply["node"]["port"].as_u64(), Some(port), "same port");
    let url = string(&reply["node"]["url"]).to_owned();
    assert_eq!(
        query(&url, redis::cmd("EXISTS").arg("k")).unwrap(),
        redis::Value::Int(0),
        "a restarted server starts empty"
    );
    assert!(
        ping(&format!("redis://reader:secret@127.0.0.1:{port}")),
        "ACL users made again"
    );

    let reply = launcher.send(&format!("kill {port}"));
    assert_eq!(
        (reply["ok"].as_bool(), reply["node"]["running"].as_bool()),
        (Some(true), Some(false))
    );
    assert!(!alive(new_pid) && !ping(&url));
    let reply = launcher.send("start node0");
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(ping(&url));
    let reply = launcher.send("stop node0");
    assert_eq!(reply["node"]["pid"], Value::Null);
    assert!(!ping(&url));
    let reply = launcher.send("restart node0");
    assert!(ping(&url), "{reply}");
    let reply = launcher.send("kill node9");
    assert_eq!(
        (reply["ok"].as_bool(), reply["error"].as_str()),
        (Some(false), Some("no node node9"))
    );

    let status = launcher.send("status");
    let pids: Vec<i32> = status["deployment"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["pid"].as_i64().unwrap() as i32)
        .collect();
    let dirs = launcher.dirs();
    drop(launcher.stdin.take());
    assert!(
        launcher.wait_exit(),
        "the launcher exits cleanly on stdin EOF"
    );
    assert_all_gone(&pids, &dirs);
}

#[test]
fn cluster_with_tls_serves_every_slot_and_sigterm_stops_everything() {
    let mut launcher = Launcher::up(&[
        "cluster",
        "--primaries",
        "3",
        "--replicas",
        "1",
        "--tls",
        "--auth-clients",
    ]);
    let deployment = launcher.deployment.clone();
    assert_eq!(deployment["kind"], "cluster");
    let roles: Vec<&str> = launcher
        .nodes()
        .iter()
        .map(|node| string(&node["role"]))
        .collect();
    assert_eq!(roles.iter().filter(|&&role| role == "primary").count(), 3);
    assert_eq!(roles.iter().filter(|&&role| role == "replica").count(), 3);
    for node in launcher.nodes() {
        let hosts = format!("127.0.0.1:{}", node["port"]);
        assert!(
            string(&deployment["url"]).contains(&hosts),
            "{hosts} is a seed"
        );
        let tls_hosts = format!("127.0.0.1:{}", node["tls_port"]);
        assert!(string(&deployment["tls_url"]).contains(&tls_hosts));
        let client = redis::Client::open(string(&node["url"])).unwrap();
        let mut connection = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        let text: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut connection)
            .unwrap();
        assert!(text.contains("cluster_state:ok"), "{text}");
    }
    // Over TLS with the client certificate the JSON names, as a language's test would.
    let tls = &deployment["tls"];
    let node = &launcher.nodes()[0];
    let over_tls = |with_client_cert: bool| {
        let mut cli = Command::new(polylock_testkit::cli_program());
        cli.args(["--tls", "--cacert", string(&tls["ca"])]);
        if with_client_cert {
            cli.args([
                "--cert",
                string(&tls["client_cert"]),
                "--key",
                string(&tls["client_key"]),
            ]);
        }
        let output = cli
            .args(["-p", &node["tls_port"].to_string(), "PING"])
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    assert_eq!(over_tls(true), "PONG");
    assert_ne!(
        over_tls(false),
        "PONG",
        "--auth-clients requires a client certificate"
    );

    let (pids, dirs) = (launcher.pids(), launcher.dirs());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(launcher.child.id() as i32, libc::SIGTERM) };
    assert!(
        launcher.wait_exit(),
        "the launcher exits cleanly on SIGTERM"
    );
    assert_all_gone(&pids, &dirs);
}

#[test]
fn sentinel_names_the_primary_and_sigterm_stops_everything() {
    let mut launcher = Launcher::up(&["sentinel", "--replicas", "1", "--sentinels", "3"]);
    let deployment = launcher.deployment.clone();
    assert_eq!(deployment["master_name"], "polylock-primary");
    let sentinels: Vec<&Value> = launcher
        .nodes()
        .iter()
        .filter(|node| node["role"] == "sentinel")
        .collect();
    assert_eq!(sentinels.len(), 3);
    let primary = launcher
        .nodes()
        .iter()
        .find(|node| node["role"] == "primary")
        .expect("a primary");
    for sentinel in &sentinels {
        let hosts = format!("127.0.0.1:{}", sentinel["port"]);
        assert!(
            string(&deployment["url"]).contains(&hosts),
            "{hosts} is listed"
        );
        let named = query(
            string(&sentinel["url"]),
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg("polylock-primary"),
        )
        .unwrap();
        let redis::Value::Array(address) = named else {
            panic!("{named:?}")
        };
        assert_eq!(
            address[1],
            redis::Value::BulkString(primary["port"].to_string().into_bytes())
        );
    }
    let reply = launcher.send("restart sentinel0");
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(ping(string(&reply["node"]["url"])));

    let status = launcher.send("status");
    let pids: Vec<i32> = status["deployment"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["pid"].as_i64().unwrap() as i32)
        .collect();
    let dirs = launcher.dirs();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(launcher.child.id() as i32, libc::SIGTERM) };
    assert!(
        launcher.wait_exit(),
        "the launcher exits cleanly on SIGTERM"
    );
    assert_all_gone(&pids, &dirs);
}

#[test]
fn server_arguments_and_a_given_certificate_set_which_stays_after_stop() {
    let files = polylock_testkit::TlsFiles::make();
    let dir = files.path("");
    let mut launcher = Launcher::up(&[
        "single",
        "--arg=--maxclients",
        "--arg=123",
        "--tls",
        &format!("--tls-dir={dir}"),
        "--cert=expired",
    ]);
    let deployment = launcher.deployment.clone();
    assert_eq!(string(&deployment["tls"]["ca"]), files.path("ca.crt"));
    assert_eq!(string(&deployment["tls"]["cert"]), files.path("server.crt"));
    let node = &launcher.nodes()[0];
    let client = redis::Client::open(string(&node["url"])).unwrap();
    let mut connection = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    let maxclients: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxclients")
        .query(&mut connection)
        .unwrap();
    assert_eq!(maxclients, ["maxclients", "123"]);
    let served: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("tls-cert-file")
        .query(&mut connection)
        .unwrap();
    assert_eq!(
        served[1],
        files.path("expired.crt"),
        "--cert picks the certificate"
    );

    let pids = launcher.pids();
    drop(launcher.stdin.take());
    assert!(launcher.wait_exit());
    assert_all_gone(&pids, &[]);
    assert!(
        Path::new(&files.path("ca.crt")).exists(),
        "a given set is left in place"
    );
}

#[test]
fn a_cluster_without_info_by_meet_and_down_stops_everything() {
    let mut launcher = Launcher::up(&[
        "cluster",
        "--meet",
        "--replicas=0",
        "--arg=--rename-command",
        "--arg=INFO",
        "--arg=",
    ]);
    assert_eq!(launcher.nodes().len(), 3);
    for node in launcher.nodes() {
        let client = redis::Client::open(string(&node["url"])).unwrap();
        let mut connection = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap();
        let info: redis::RedisResult<String> = redis::cmd("INFO").query(&mut connection);
        assert!(info.is_err(), "INFO is renamed away");
        let state: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut connection)
            .unwrap();
        assert!(state.contains("cluster_state:ok"), "{state}");
    }
    let (pids, dirs) = (launcher.pids(), launcher.dirs());
    let reply = launcher.send("down");
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(launcher.wait_exit(), "the launcher exits after down");
    assert_all_gone(&pids, &dirs);
}
