//! `boitata-agent`: Boitata's agent as an ACP (Agent Client Protocol) agent.
//!
//! - `boitata-agent --addr HOST:PORT`: ACP over TCP, for the sandbox a blueprint's
//!   `agent_sandbox` node provisions. Clients must present the per-run secret from
//!   `BOITATA_AGENT_SECRET` (required unless `--insecure-no-secret`). Prints
//!   `boitata-agent: listening on ADDR` on stderr once bound.
//! - `boitata-agent --stdio`: ACP over stdin/stdout, so any ACP client (an editor) can
//!   start it. Nothing but protocol goes to stdout. `BOITATA_AGENT_SECRET` is optional.
//!   Started without what its provider needs (no API key in a trimmed environment),
//!   it still answers `initialize` and refuses `session/new` and `session/prompt` with
//!   a JSON-RPC error saying what is missing (ACP `auth_required` for a key); it exits
//!   only when the client closes stdin.
//!
//! Provider settings and keys come from the launch environment, `--config`,
//! `$BOITATA_CONFIG` and the user config dir (`boitata_core::config`), never from a
//! `./boitata.toml`: the current directory is an untrusted checkout, which must not
//! choose where the key is sent. The secret and keys are removed from the process
//! environment before the agent runs; its commands get an explicit allowlist anyway,
//! and the process is non-dumpable so they cannot read its `/proc/PID/environ`.
//! SIGTERM (or Ctrl-C) cancels running turns, lets them answer, and exits 0.
//!
//! Exit codes: 0 clean shutdown, 1 the server failed, 2 usage or configuration error.
//! All logic lives in `boitata-acp` and `boitata-core`.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use boitata_acp::AcpServer;
use boitata_core::config::{Config, ConfigSearch, ProcessEnv};
use boitata_core::runtime::Runtime;
use boitata_provider::ProviderError;
use clap::Parser;
use tokio_util::sync::CancellationToken;

/// The variable holding the per-run secret.
const SECRET_VARIABLE: &str = "BOITATA_AGENT_SECRET";

/// Secrets removed from the process environment once read.
const SCRUBBED_VARIABLES: &[&str] = &[
    SECRET_VARIABLE,
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "BOITATA_API_TOKEN",
];

/// Boitata's agent, served over the Agent Client Protocol.
#[derive(Debug, Parser)]
#[command(name = "boitata-agent", version, about)]
#[command(group(clap::ArgGroup::new("transport").required(true).args(["addr", "stdio"])))]
struct Args {
    /// Serve ACP over TCP on HOST:PORT (port 0 picks a free one; the address is logged).
    #[arg(long, value_name = "HOST:PORT")]
    addr: Option<String>,

    /// Serve ACP over stdin and stdout (for editors and other ACP clients).
    #[arg(long)]
    stdio: bool,

    /// The workspace root: sessions must work in it or beneath it [default: the current directory].
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// The config file [default: $BOITATA_CONFIG, the user config dir; never ./boitata.toml].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// With --addr: accept clients that present no secret. Only on a network nobody else can reach.
    #[arg(long)]
    insecure_no_secret: bool,
}

/// Why the agent stopped early, with its exit code.
enum Failure {
    /// Bad arguments or settings: exit 2.
    Usage(String),
    /// The server could not run: exit 1.
    Runtime(String),
}

fn main() -> ExitCode {
    let hardened = boitata_tools::process::harden_process();
    let args = Args::parse();
    init_logging();
    if let Err(e) = hardened {
        tracing::warn!("cannot make the process non-dumpable: {e}");
    }
    // Everything that touches the process environment happens here, before any thread
    // exists: reading it, then removing the secrets from it.
    let prepared = prepare(&args);
    scrub_environment();
    hide_launch_environment();
    let result = prepared.and_then(|ready| serve(&args, ready));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            say(&message);
            ExitCode::from(2)
        }
        Err(Failure::Runtime(message)) => {
            say(&message);
            ExitCode::from(1)
        }
    }
}

/// What [`prepare`] reads from the arguments and the environment.
struct Ready {
    /// The provider and tools, or (with `--stdio` only) why the provider cannot be
    /// built, with the settings that were read.
    runtime: Result<Runtime, (Config, ProviderError)>,
    secret: Option<String>,
    workspace: PathBuf,
}

/// Reads the secret, finds the workspace, loads the settings and builds the provider.
fn prepare(args: &Args) -> Result<Ready, Failure> {
    let secret = std::env::var(SECRET_VARIABLE)
        .ok()
        .filter(|s| !s.is_empty());
    if args.addr.is_some() && secret.is_none() && !args.insecure_no_secret {
        return Err(Failure::Usage(format!(
            "{SECRET_VARIABLE} is not set: over TCP a client must present a per-run secret \
             (set it, or pass --insecure-no-secret on a private network)"
        )));
    }
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| Failure::Usage(format!("cannot read the current directory: {e}")))?,
    };
    let workspace = std::fs::canonicalize(&workspace)
        .map_err(|e| Failure::Usage(format!("workspace {}: {e}", workspace.display())))?;
    let config = Config::load_with(
        args.config.as_deref(),
        &ProcessEnv,
        &ConfigSearch::without_current_dir(),
    )
    .map_err(|e| Failure::Usage(e.to_string()))?;
    let runtime = match Runtime::from_config(config.clone(), &ProcessEnv) {
        Ok(runtime) => Ok(runtime),
        // An editor may start the agent with a trimmed environment: answer
        // `initialize` and say what is missing on `session/new`, where it can show it.
        Err(problem) if args.stdio => {
            tracing::warn!("{problem}: sessions will be refused until it is fixed");
            Err((config, problem))
        }
        Err(problem) => return Err(Failure::Usage(problem.to_string())),
    };
    Ok(Ready {
        runtime,
        secret,
        workspace,
    })
}

/// Removes the secret and API keys from the process environment: nothing started
/// later can inherit them.
fn scrub_environment() {
    for name in SCRUBBED_VARIABLES {
        std::env::remove_var(name);
    }
}

/// Makes the process non-dumpable, so that its launch environment, which
/// `/proc/PID/environ` keeps showing after [`scrub_environment`], cannot be read by
/// the commands the agent runs (same user, no `CAP_SYS_PTRACE`): `cat
/// /proc/*/environ` must not find the secret or the API key. Signals still reach it.
fn hide_launch_environment() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!("cannot make the process non-dumpable: {e}");
    }
}

fn serve(args: &Args, ready: Ready) -> Result<(), Failure> {
    let shutdown = CancellationToken::new();
    let server = match ready.runtime {
        Ok(runtime) => AcpServer::new(runtime, &ready.workspace),
        Err((config, problem)) => AcpServer::unavailable(&config, &problem, &ready.workspace),
    }
    .map_err(|e| Failure::Usage(e.to_string()))?
    .with_secret(ready.secret)
    .with_shutdown(shutdown.clone());
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the async runtime: {e}")))?;
    let result = tokio.block_on(async {
        watch_signals(shutdown.clone())?;
        match &args.addr {
            Some(addr) => serve_tcp(&server, addr, args.insecure_no_secret).await,
            None => serve_stdio(&server, &shutdown).await,
        }
    });
    // A blocking stdin read may never return: do not wait for it.
    tokio.shutdown_timeout(Duration::from_millis(200));
    result
}

async fn serve_tcp(server: &AcpServer, addr: &str, insecure: bool) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::Runtime(format!("cannot listen on {addr}: {e}")))?;
    let bound: SocketAddr = listener
        .local_addr()
        .map_err(|e| Failure::Runtime(format!("cannot listen on {addr}: {e}")))?;
    if insecure && !server.requires_secret() {
        tracing::warn!("accepting clients without a secret (--insecure-no-secret)");
    }
    // Launchers wait for this line.
    say(&format!("listening on {bound}"));
    server
        .serve_tcp(listener)
        .await
        .map_err(|e| Failure::Runtime(e.to_string()))
}

async fn serve_stdio(server: &AcpServer, shutdown: &CancellationToken) -> Result<(), Failure> {
    let stdio = tokio::io::join(tokio::io::stdin(), tokio::io::stdout());
    tracing::info!("serving ACP on stdin/stdout");
    tokio::select! {
        result = server.serve(stdio) => result.map_err(|e| Failure::Runtime(e.to_string())),
        // serve() has cancelled its turns and answered them by the time it sees the
        // shutdown; this arm only covers a client that stopped reading.
        _ = async {
            shutdown.cancelled().await;
            tokio::time::sleep(boitata_acp::TURN_SHUTDOWN_GRACE + Duration::from_secs(1)).await;
        } => Ok(()),
    }
}

/// SIGTERM or Ctrl-C: cancel running turns and shut down.
fn watch_signals(shutdown: CancellationToken) -> Result<(), Failure> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| Failure::Runtime(format!("cannot watch SIGTERM: {e}")))?;
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|e| Failure::Runtime(format!("cannot watch SIGINT: {e}")))?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: cancelling running turns and shutting down"),
            _ = interrupt.recv() => tracing::info!("SIGINT: cancelling running turns and shutting down"),
        }
        shutdown.cancel();
    });
    Ok(())
}

/// Logs go to stderr (stdout may be the protocol). `RUST_LOG` overrides the level.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,agent_client_protocol=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

/// One line on stderr, prefixed with the program's name.
fn say(message: &str) {
    let _ = writeln!(std::io::stderr(), "boitata-agent: {message}");
}
