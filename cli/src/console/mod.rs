//! `polylock console`: the locks under a pattern, their holders and queues, the clients and a
//! timeline, live in a browser. One axum server on the core's tokio runtime serves the page
//! (embedded: `assets/`), a JSON snapshot, an event stream and, with `--allow-write`,
//! force-unlock. One task reads Redis once a second while someone looks
//! ([`snapshot::Refresher`]); every page and stream shares its reading, so the cost on Redis
//! does not grow with the pages open.

mod auth;
mod clients;
mod elections;
mod key_sweep;
mod lock_page;
mod primaries;
mod rate_history;
mod read_schedule;
mod server;
mod snapshot;

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Args;

use polylock_cli_common::block_on;
use polylock_cli_common::error::{CliError, CliResult};
use polylock_cli_common::raw;

#[derive(Args)]
#[command(after_help = "Examples:
  polylock console                                  # http://127.0.0.1:7474/, read-only
  polylock console --pattern 'orders:*' --bind 127.0.0.1:0   # any free port (printed)
  polylock console --allow-write                    # offers force-unlock, with a confirmation
  polylock console --bind 0.0.0.0:7474              # prints a generated token to open it with

Prints `polylock console: http://HOST:PORT/` first. Binds 127.0.0.1 by default, and then
answers only requests addressed to a loopback name (against DNS rebinding). With a token
(--token, or one generated for a non-loopback bind), every request for the page, the API or
the event stream needs it: `Authorization: Bearer TOKEN`, or `?token=TOKEN` on the page's and
the stream's URL; actions (POST) take it in the header only. docs/console.md has the rest.")]
pub struct ConsoleArgs {
    /// The global --redis URL (filled in by main).
    #[arg(skip)]
    pub redis: String,
    /// The address to serve on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:7474")]
    pub bind: SocketAddr,
    /// Redis glob pattern of lock names.
    #[arg(long, default_value = "*")]
    pub pattern: String,
    /// Offer force-unlock (off: the console only reads).
    #[arg(long)]
    pub allow_write: bool,
    /// The token every request needs. Without it, a non-loopback bind generates one.
    #[arg(long, env = "POLYLOCK_CONSOLE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The clients' key prefix (`key_prefix`): the pattern matches the names under it, shown
    /// without it.
    #[arg(long, env = "POLYLOCK_KEY_PREFIX", value_name = "PREFIX")]
    pub key_prefix: Option<String>,
    /// The most names shown (those found first, and free locks the clients' metrics show in
    /// use); the page says how many more matched. Bounds the page's data, not the commands
    /// per refresh (--reads-per-refresh does).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_locks: u32,
    /// The most names read per refresh (one inspection script each): those not read for the
    /// longest. With N names shown, each row is at most ceil(N / this) refreshes old.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub reads_per_refresh: u32,
}

/// What the routes share: how to reach Redis, what the console may do, and the latest reading.
pub(crate) struct Console {
    pub redis: String,
    pub key_prefix: Option<String>,
    pub allow_write: bool,
    pub readings: snapshot::Readings,
}

pub fn run(args: ConsoleArgs) -> CliResult<()> {
    let generated = args.token.is_none() && !args.bind.ip().is_loopback();
    let token = match args.token {
        Some(token) if token.trim().is_empty() => {
            return Err(CliError::Usage("--token must not be empty".into()))
        }
        Some(token) => Some(token),
        None if generated => Some(uuid::Uuid::new_v4().simple().to_string()),
        None => None,
    };
    block_on(async move {
        // A bad URL or key prefix is a usage error at once, not a banner forever; a server
        // that does not answer yet is a banner (the console waits for it).
        match raw::client(&args.redis, args.key_prefix.as_deref()).await {
            Ok(client) => {
                client.shutdown().await;
            }
            Err(err @ CliError::Usage(_)) => return Err(err),
            Err(_) => {}
        }
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .map_err(|err| CliError::Usage(format!("cannot listen on {}: {err}", args.bind)))?;
        let address = listener
            .local_addr()
            .map_err(|err| CliError::Failed(format!("no local address: {err}")))?;
        let refresher = snapshot::Refresher::new(
            &args.redis,
            args.key_prefix.clone(),
            &args.pattern,
            args.allow_write,
            args.max_locks as usize,
            args.reads_per_refresh as usize,
        );
        let readings = refresher.start().await;
        let console = Arc::new(Console {
            redis: args.redis,
            key_prefix: args.key_prefix,
            allow_write: args.allow_write,
            readings,
        });
        let access = auth::Access::new(token.clone(), address);
        println!("polylock console: http://{address}/");
        match &token {
            Some(token) if generated => println!(
                "token: {token} (open http://{address}/?token={token}; give it to whoever may look)"
            ),
            Some(_) => println!("token: as given (--token or POLYLOCK_CONSOLE_TOKEN)"),
            None => {}
        }
        if args.allow_write {
            println!("write: force-unlock is offered (--allow-write)");
        }
        server::serve(listener, console, access).await
    })
}
