//! `boitata-server`: the orchestrator. A thin binary: it parses arguments, loads the
//! config, starts [`boitata_server::Server`] and serves until Ctrl-C or SIGTERM.
//!
//! Exit codes: 0 after a clean shutdown, 1 when serving fails, 2 for a usage or
//! configuration error (including a non-loopback `--bind` without a token).

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use boitata_core::config::{Config, ProcessEnv};
use boitata_server::{Server, ServerError, ServerOptions, DEFAULT_BIND};
use clap::Parser;

/// Runs blueprints for remote clients (the `boitata` CLI's `--remote`, the web UI)
/// and streams their events.
#[derive(Debug, Parser)]
#[command(name = "boitata-server", version, about, long_about = None)]
struct Args {
    /// The trusted blueprints directory: every valid *.yaml in it is offered by name.
    #[arg(long, value_name = "DIR", env = "BOITATA_BLUEPRINTS_DIR")]
    blueprints_dir: PathBuf,
    /// Where to listen. A non-loopback address needs an API token.
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_BIND)]
    bind: SocketAddr,
    /// Where runs are stored (default: data_dir in the config, $BOITATA_DATA_DIR, then ~/.local/share/boitata).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Config file (default: $BOITATA_CONFIG, ./boitata.toml, then ~/.config/boitata/config.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// A host name to serve besides IP addresses and localhost (the name a reverse proxy
    /// uses). Repeatable.
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// How many runs execute at once; the rest wait as queued (default: server.max_concurrent_runs, 4).
    #[arg(long, value_name = "N")]
    max_concurrent_runs: Option<usize>,
}

fn main() -> ExitCode {
    // Non-dumpable: commands cannot read this process's /proc/PID/environ (keys).
    let _ = boitata_tools::process::harden_process();
    let args = Args::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(2, &format!("cannot start the async runtime: {e}")),
    };
    let code = runtime.block_on(run(args));
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

async fn run(args: Args) -> ExitCode {
    let mut config = match Config::load(args.config.as_deref(), &ProcessEnv) {
        Ok(config) => config,
        Err(e) => return fail(2, &e.to_string()),
    };
    if let Err(e) = config.check_key_destination() {
        return fail(2, &e.to_string());
    }
    if let Some(n) = args.max_concurrent_runs {
        config.server.max_concurrent_runs = n;
    }
    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| config.data_dir_or_default());
    let mut options = ServerOptions::new(args.blueprints_dir, data_dir, config);
    options.bind = args.bind;
    options.allowed_hosts = args.allowed_hosts;

    let server = match Server::start(options).await {
        Ok(server) => server,
        Err(
            e @ (ServerError::TokenRequired { .. }
            | ServerError::Catalog(_)
            | ServerError::Store(_)),
        ) => return fail(2, &e.to_string()),
        Err(e) => return fail(1, &e.to_string()),
    };
    // Tests and scripts read this line to learn the port.
    let _ = writeln!(
        std::io::stderr(),
        "boitata-server listening on http://{}",
        server.local_addr()
    );
    match server.serve(shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(1, &e.to_string()),
    }
}

/// Resolves on the first Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

fn fail(code: u8, message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "error: {message}");
    ExitCode::from(code)
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BOITATA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tower_http=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
