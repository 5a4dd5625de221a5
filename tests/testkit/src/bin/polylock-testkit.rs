//! The one redis-server launcher of every language's tests and the bench, on top of the Rust
//! test kit: `polylock-testkit up single|cluster|sentinel [options] --json`.
//!
//! It starts the deployment on free loopback ports, prints one JSON line describing it (see
//! `docs/testing.md`), then answers control lines on stdin (`kill`, `stop`, `start`,
//! `restart` a node, `status`, `down`) with one JSON line each. When stdin closes (the test
//! process finished or died) or on SIGTERM/SIGINT/SIGHUP it stops every server and removes
//! its temporary files, so a test never leaves a server behind.

use std::io::{self, BufRead, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::{Args, Parser, Subcommand};
use polylock_testkit::sentinel::MASTER_NAME;
use polylock_testkit::{Cluster, RedisServer, SentinelSet, TlsFiles};
use serde_json::{json, Value};

#[derive(Parser)]
#[command(
    name = "polylock-testkit",
    about = "Real redis-server deployments on free loopback ports for the tests of every language"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Starts a deployment, prints it as one JSON line, then serves control lines on stdin.
    Up {
        #[command(subcommand)]
        deployment: Deployment,
    },
}

#[derive(Subcommand)]
enum Deployment {
    /// Independent servers (one by default; several for a RedLock).
    Single {
        /// How many servers.
        #[arg(long, default_value_t = 1)]
        count: usize,
        #[command(flatten)]
        common: Common,
    },
    /// A Redis Cluster, every slot covered.
    Cluster {
        #[arg(long, default_value_t = 3)]
        primaries: usize,
        /// Replicas per primary.
        #[arg(long, default_value_t = 1)]
        replicas: usize,
        /// Make the cluster with CLUSTER ADDSLOTSRANGE and MEET instead of `redis-cli --cluster
        /// create`, which needs INFO (for servers with INFO renamed away); no replicas, no TLS.
        #[arg(long)]
        meet: bool,
        #[command(flatten)]
        common: Common,
    },
    /// One primary with replicas watched by sentinels (master name `polylock-primary`).
    Sentinel {
        #[arg(long, default_value_t = 2)]
        replicas: usize,
        #[arg(long, default_value_t = 3)]
        sentinels: usize,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
struct Common {
    /// Also serve TLS on another port with test certificates (a test CA, server and client
    /// certificates, made by tests/tls/make-certs.sh).
    #[arg(long)]
    tls: bool,
    /// With --tls: require a client certificate.
    #[arg(long, requires = "tls")]
    auth_clients: bool,
    /// With --tls: use the certificates make-certs.sh made into this directory (left in place)
    /// instead of a new set.
    #[arg(long, requires = "tls", value_name = "DIR")]
    tls_dir: Option<String>,
    /// With --tls: the data servers' certificate of that set (`server`, or `expired`).
    #[arg(long, requires = "tls", default_value = "server", value_name = "NAME")]
    cert: String,
    /// One more argument for each data server after the kit's own (a later value of an option
    /// wins), repeated: `--arg=--rename-command --arg=INFO --arg=`.
    #[arg(long = "arg", allow_hyphen_values = true, value_name = "ARG")]
    server_args: Vec<String>,
    /// An ACL user made on every data server (again after a restart): the words of
    /// `ACL SETUSER`, e.g. `--acl-user "reader on >secret ~* +get"`.
    #[arg(long = "acl-user", value_name = "RULES")]
    acl_users: Vec<String>,
    /// Print the description as JSON (the only format; accepted so callers say what they read).
    #[arg(long)]
    json: bool,
}

/// A running deployment and the temporary files it owns; dropping it kills every server and
/// removes their directories and the certificates.
struct Running {
    kind: &'static str,
    topology: Topology,
    /// The data nodes' roles when the deployment started (a failover changes them later).
    roles: Vec<&'static str>,
    acl_users: Vec<String>,
    tls: Option<TlsFiles>,
}

enum Topology {
    Single(Vec<RedisServer>),
    Cluster(Cluster),
    Sentinel(SentinelSet),
}

/// One server of a deployment, as the JSON names it.
struct Node<'a> {
    name: String,
    role: &'static str,
    server: &'a mut RedisServer,
}

fn main() -> ExitCode {
    // Blocked before any thread or child exists, so only the signal thread takes them
    // (children get an empty mask back from `Command`).
    let stop_signals = block_stop_signals();
    let Cli {
        command: Command::Up { deployment },
    } = Cli::parse();
    let mut running = match start(deployment) {
        Ok(running) => running,
        Err(why) => {
            eprintln!("polylock-testkit: {why}");
            return ExitCode::from(2);
        }
    };
    let description = running.describe();
    let running = Arc::new(Mutex::new(Some(running)));
    let for_signals = Arc::clone(&running);
    std::thread::spawn(move || {
        wait_for_signal(&stop_signals);
        // Taking the lock waits for a control line being served; dropping stops everything.
        drop(for_signals.lock().unwrap_or_else(|e| e.into_inner()).take());
        std::process::exit(0);
    });
    let mut stdout = io::stdout().lock();
    if writeln!(stdout, "{description}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        // Nobody reads us: stop what we started (the signal thread holds the other reference).
        drop(running.lock().unwrap_or_else(|e| e.into_inner()).take());
        return ExitCode::FAILURE;
    }
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut guard = running.lock().unwrap_or_else(|e| e.into_inner());
        let Some(deployment) = guard.as_mut() else {
            break;
        };
        let (reply, done) = match control(deployment, line) {
            Ok(Reply::Node(node)) => (json!({ "ok": true, "node": node }), false),
            Ok(Reply::Status(status)) => (json!({ "ok": true, "deployment": status }), false),
            Ok(Reply::Down) => {
                guard.take();
                (json!({ "ok": true }), true)
            }
            Err(why) => (json!({ "ok": false, "error": why }), false),
        };
        drop(guard);
        let written = writeln!(stdout, "{reply}").and_then(|()| stdout.flush());
        if done || written.is_err() {
            break;
        }
    }
    // stdin closed: the test process is gone or done.
    drop(running.lock().unwrap_or_else(|e| e.into_inner()).take());
    ExitCode::SUCCESS
}

fn start(deployment: Deployment) -> Result<Running, String> {
    let common = match &deployment {
        Deployment::Single { common, .. }
        | Deployment::Cluster { common, .. }
        | Deployment::Sentinel { common, .. } => common,
    };
    let tls = common.tls.then(|| match &common.tls_dir {
        Some(dir) => TlsFiles::existing(dir),
        None => TlsFiles::make(),
    });
    let tls_with_auth = tls.as_ref().map(|files| (files, common.auth_clients));
    let cert = common.cert.as_str();
    let args: Vec<&str> = common.server_args.iter().map(String::as_str).collect();
    let (kind, topology) = match &deployment {
        Deployment::Single { count, .. } => {
            if *count == 0 {
                return Err("--count must be at least 1".into());
            }
            let servers = (0..*count)
                .map(|_| match tls_with_auth {
                    Some((files, auth)) => RedisServer::start_tls_with(files, cert, auth, &args),
                    None => RedisServer::start_with(&args),
                })
                .collect();
            ("single", Topology::Single(servers))
        }
        Deployment::Cluster {
            primaries,
            replicas,
            meet,
            ..
        } => {
            if *primaries == 0 {
                return Err("--primaries must be at least 1".into());
            }
            if cert != "server" {
                return Err("a cluster's nodes use the certificate `server`".into());
            }
            let cluster = match (tls_with_auth, *meet) {
                (None, true) if *replicas == 0 => Cluster::start_primaries_with(*primaries, &args),
                (_, true) => return Err("--meet makes a cluster without replicas or TLS".into()),
                (Some((files, auth)), false) => {
                    Cluster::start_tls_with(*primaries, *replicas, files, auth, &args)
                }
                (None, false) => Cluster::start_with(*primaries, *replicas, &args),
            };
            ("cluster", Topology::Cluster(cluster))
        }
        Deployment::Sentinel {
            replicas,
            sentinels,
            ..
        } => {
            if *sentinels == 0 {
                return Err("--sentinels must be at least 1".into());
            }
            if cert != "server" {
                return Err("a sentinel set's servers use the certificate `server`".into());
            }
            let set = SentinelSet::start_with(*replicas, *sentinels, tls_with_auth, &args);
            ("sentinel", Topology::Sentinel(set))
        }
    };
    let roles = match &topology {
        Topology::Single(servers) => vec!["server"; servers.len()],
        Topology::Cluster(cluster) => {
            let replicas: Vec<u16> = cluster
                .topology()
                .iter()
                .filter(|info| info.replicates.is_some())
                .map(|info| info.port)
                .collect();
            let role = |server: &RedisServer| {
                if replicas.contains(&server.port()) {
                    "replica"
                } else {
                    "primary"
                }
            };
            cluster.nodes.iter().map(role).collect()
        }
        Topology::Sentinel(set) => (0..set.servers.len())
            .map(|i| if i == 0 { "primary" } else { "replica" })
            .collect(),
    };
    let mut running = Running {
        kind,
        topology,
        roles,
        acl_users: common.acl_users.clone(),
        tls,
    };
    let acl_users = running.acl_users.clone();
    for node in running.nodes() {
        if node.role != "sentinel" {
            add_acl_users(node.server, &acl_users)?;
        }
    }
    Ok(running)
}

/// Makes the `--acl-user` users on one data server.
fn add_acl_users(server: &RedisServer, users: &[String]) -> Result<(), String> {
    for user in users {
        let mut words = vec!["ACL", "SETUSER"];
        words.extend(user.split_whitespace());
        let reply = server.command(&words).unwrap_or_default();
        if reply != "+OK" {
            return Err(format!("ACL SETUSER {user} on {}: {reply}", server.port()));
        }
    }
    Ok(())
}

enum Reply {
    Node(Value),
    Status(Value),
    Down,
}

/// Serves one control line: `kill|stop|start|restart <node>` (a node's name or one of its
/// ports), `status`, `down`.
fn control(running: &mut Running, line: &str) -> Result<Reply, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["status"] => Ok(Reply::Status(running.describe())),
        ["down"] => Ok(Reply::Down),
        [action @ ("kill" | "stop" | "start" | "restart"), which] => {
            let acl_users = running.acl_users.clone();
            let mut nodes = running.nodes();
            let node = nodes
                .iter_mut()
                .find(|node| node.is(which))
                .ok_or_else(|| format!("no node {which}"))?;
            match *action {
                "kill" => node.server.kill(),
                "stop" => node.server.stop(),
                "start" if node.server.is_running() => {
                    return Err(format!("{} is running", node.name))
                }
                // A stopped server comes back on its port with its arguments and directory.
                _ => {
                    node.server.restart();
                    if node.role != "sentinel" {
                        add_acl_users(node.server, &acl_users)?;
                    }
                }
            }
            Ok(Reply::Node(node.describe()))
        }
        _ => Err(format!(
            "unknown control line {line:?}: kill|stop|start|restart <node>, status, down"
        )),
    }
}

impl Running {
    /// Every server, data nodes first (named `node<i>`), then sentinels (`sentinel<i>`).
    fn nodes(&mut self) -> Vec<Node<'_>> {
        let (data, sentinels) = match &mut self.topology {
            Topology::Single(servers) => (servers, None),
            Topology::Cluster(cluster) => (&mut cluster.nodes, None),
            Topology::Sentinel(set) => (&mut set.servers, Some(&mut set.sentinels)),
        };
        let roles = &self.roles;
        let mut nodes: Vec<Node<'_>> = data
            .iter_mut()
            .zip(roles)
            .enumerate()
            .map(|(i, (server, role))| Node {
                name: format!("node{i}"),
                role,
                server,
            })
            .collect();
        for (i, server) in sentinels.into_iter().flatten().enumerate() {
            nodes.push(Node {
                name: format!("sentinel{i}"),
                role: "sentinel",
                server,
            });
        }
        nodes
    }

    /// The JSON line the launcher prints first (and `status` answers).
    fn describe(&mut self) -> Value {
        let url = match &self.topology {
            Topology::Single(servers) => servers[0].url(),
            Topology::Cluster(cluster) => cluster.url(),
            Topology::Sentinel(set) => set.url(),
        };
        let tls_url = self.tls.as_ref().map(|_| match &self.topology {
            Topology::Single(servers) => servers[0].tls_url(),
            Topology::Cluster(cluster) => cluster.tls_url(),
            Topology::Sentinel(set) => set.tls_url(),
        });
        let master_name = matches!(self.topology, Topology::Sentinel(_)).then_some(MASTER_NAME);
        let tls = self.tls.as_ref().map(|files| {
            json!({
                "dir": files.path(""),
                "ca": files.path("ca.crt"),
                "cert": files.path("server.crt"),
                "key": files.path("server.key"),
                "client_cert": files.path("client.crt"),
                "client_key": files.path("client.key"),
            })
        });
        let acl_users: Vec<Value> = self
            .acl_users
            .iter()
            .map(|rules| {
                let mut words = rules.split_whitespace();
                let name = words.next().unwrap_or_default();
                // `>secret` gives the user a password.
                let password = words.find_map(|word| word.strip_prefix('>'));
                json!({ "name": name, "password": password, "rules": rules })
            })
            .collect();
        let kind = self.kind;
        let nodes: Vec<Value> = self.nodes().iter().map(Node::describe).collect();
        json!({
            "kind": kind,
            "launcher_pid": std::process::id(),
            "url": url,
            "tls_url": tls_url,
            "master_name": master_name,
            "nodes": nodes,
            "tls": tls,
            "acl_users": acl_users,
        })
    }
}

impl Node<'_> {
    fn is(&self, which: &str) -> bool {
        let port = which.parse::<u16>().ok();
        self.name == which
            || port == Some(self.server.port())
            || (port.is_some() && port == self.server.tls_port())
    }

    fn describe(&self) -> Value {
        let server = &self.server;
        json!({
            "name": self.name,
            "role": self.role,
            "port": server.port(),
            "url": server.url(),
            "tls_port": server.tls_port(),
            "tls_url": server.tls_port().map(|port| format!("rediss://127.0.0.1:{port}")),
            "pid": server.pid(),
            "running": server.is_running(),
            "dir": server.dir().to_string_lossy(),
        })
    }
}

/// Blocks SIGTERM, SIGINT and SIGHUP in this thread (and the threads it starts), so that
/// `wait_for_signal` receives them instead of the default action killing the launcher with
/// its servers still running.
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: plain libc calls on a local, initialised signal set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, signal);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for_signal(set: &libc::sigset_t) {
    let mut signal = 0;
    // SAFETY: `set` was initialised by `block_stop_signals`.
    while unsafe { libc::sigwait(set, &mut signal) } != 0 {}
}
