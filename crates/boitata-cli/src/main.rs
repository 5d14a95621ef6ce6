//! `boitata`: run a coding agent on a repository, locally or in a sandbox.
//!
//! A thin binary: it parses arguments, loads the config, builds the runtime through
//! `boitata_core::runtime`, calls the libraries and maps the outcome to an exit code
//! (0 succeeded, 1 failed, 130 cancelled, 2 usage or config error).

mod args;
mod blueprint;
mod error;
mod remote;
mod render;
mod run;
mod runs;
mod sandbox;
mod session;
mod terminal;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::args::{BlueprintCommand, Cli, Command, RunsCommand, SandboxCommand};
use crate::error::CliError;

fn main() -> ExitCode {
    // Non-dumpable: commands cannot read this process's /proc/PID/environ (keys).
    let _ = boitata_tools::process::harden_process();
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "error: cannot start the async runtime: {e}"
            );
            return ExitCode::from(2);
        }
    };
    let code = match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {}", terminal::safe(&e.message));
            e.code
        }
    };
    // Do not wait for blocking tasks (a stdin reader, a signal watcher) to notice.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    ExitCode::from(code)
}

async fn dispatch(cli: Cli) -> Result<u8, CliError> {
    match cli.command {
        Command::Run(args) if args.remote.remote.is_some() => remote::run(args).await,
        Command::Run(args) if args.blueprint.is_some() => blueprint::run(&cli.global, args).await,
        Command::Run(args) => run::run(&cli.global, args).await,
        Command::Blueprint { command } => match command {
            BlueprintCommand::Validate(args) => Ok(blueprint::validate(&args)),
            BlueprintCommand::Graph(args) => blueprint::graph(&args),
        },
        Command::Runs { command } => match command {
            RunsCommand::List(args) if args.remote.remote.is_some() => {
                remote::runs_list(args).await
            }
            RunsCommand::Show(args) if args.remote.remote.is_some() => {
                remote::runs_show(args).await
            }
            RunsCommand::List(args) => runs::list(&cli.global, args),
            RunsCommand::Show(args) => runs::show(&cli.global, args),
        },
        Command::Sandbox { command } => match command {
            SandboxCommand::List(args) => sandbox::list(&cli.global, args).await,
            SandboxCommand::Gc(args) => sandbox::gc(&cli.global, args).await,
        },
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BOITATA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
