//! `polylock-demo`: the demo on its own, with the options, output and exit codes of
//! `polylock demo` (which runs the same library), and the Rust worker it starts.

use clap::Parser;
use polylock_cli_common::{exit_on_error, RedisOption};
use polylock_demo::{DemoArgs, WorkerCommand};

#[derive(Parser)]
#[command(
    name = "polylock-demo",
    version,
    about = "The cross-language demo of polylock, as `polylock demo` runs it",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(flatten)]
    global: RedisOption,
    #[command(flatten)]
    demo: DemoArgs,
    #[command(subcommand)]
    worker: Option<WorkerCommand>,
}

fn main() {
    let cli = Cli::parse();
    exit_on_error(match cli.worker {
        Some(worker) => worker.run(),
        None => polylock_demo::run(DemoArgs {
            redis: cli.global.redis,
            ..cli.demo
        }),
    });
}
