//! What the `polylock` command (`cli/`) and its demo (`tests/demo/`, `polylock demo`) share:
//! the errors and their exit codes (`error`), the Redis connections with their messages
//! (`raw`), the global `--redis` option and `block_on`.

pub mod error;
pub mod raw;

pub use error::{CliError, CliResult};

/// The global `--redis URL` option (also `-u`, or `POLYLOCK_REDIS_URL`), as the `polylock`
/// command and the demo's own binary take it.
#[derive(clap::Args)]
pub struct RedisOption {
    /// Redis URL: redis://[user:password@]host:port[/db] (rediss:// for TLS),
    /// redis+cluster://host:port[,host:port...], or
    /// redis+sentinel://host:port[,host:port...]/<master-name>[/db].
    #[arg(
        long,
        short = 'u',
        global = true,
        env = "POLYLOCK_REDIS_URL",
        hide_env_values = true
    )]
    pub redis: Option<String>,
}

/// Runs a future to completion on the core's runtime (the command is synchronous otherwise).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    polylock::runtime().block_on(future)
}

/// Prints `polylock: ERROR` and exits with its code (`polylock --help` lists them) when
/// `result` is an error.
pub fn exit_on_error(result: CliResult<()>) {
    if let Err(err) = result {
        eprintln!("polylock: {err}");
        std::process::exit(err.exit_code());
    }
}
