//! Sandboxes from the CLI: the executor with the Docker backend's node types, the
//! daemon check before a sandbox blueprint runs, `boitata sandbox list` and
//! `boitata sandbox gc`.
//!
//! The Docker backend connects lazily: a blueprint without sandbox nodes never
//! touches a daemon, and runs where there is none.

use std::io::Write;
use std::sync::Arc;

use boitata_blueprint::{Blueprint, Executor, NodeHandlers};
use boitata_core::store::{RunStore, StoreError};
use boitata_core::RunStatus;
use boitata_orchestrator::reaper::{self, Standing};
use boitata_orchestrator::{DockerBackend, Sandbox, SandboxError, SandboxInfo, SandboxNodes};

use crate::args::{GlobalArgs, SandboxGcArgs, SandboxListArgs};
use crate::error::{CliError, EXIT_FAILED};
use crate::session;

/// A blueprint executor with the host node types and the Docker sandbox node types
/// (their teardown hook included).
pub(crate) struct SandboxedExecutor {
    pub(crate) executor: Executor,
    backend: Arc<DockerBackend>,
}

impl SandboxedExecutor {
    /// Uses the daemon `DOCKER_HOST` names; does not connect.
    pub(crate) fn from_env() -> Self {
        let backend = Arc::new(DockerBackend::from_env());
        let sandboxes = SandboxNodes::new(backend.clone());
        let mut handlers = NodeHandlers::host();
        sandboxes.register(&mut handlers);
        SandboxedExecutor {
            executor: Executor::new(handlers).with_hook(sandboxes.hook()),
            backend,
        }
    }

    /// For a blueprint with sandbox nodes, checks that the daemon answers, so that a
    /// missing one is a usage error (one line, exit 2) before any run is recorded.
    pub(crate) async fn preflight(&self, blueprint: &Blueprint) -> Result<(), CliError> {
        if !boitata_orchestrator::needs_sandbox(blueprint) {
            return Ok(());
        }
        self.backend.connect().await.map_err(sandbox_error)
    }
}

/// A daemon that cannot be reached is a configuration problem (exit 2); anything
/// else failed (exit 1).
fn sandbox_error(e: SandboxError) -> CliError {
    match e {
        SandboxError::DaemonUnavailable { .. } => CliError::usage(e),
        other => CliError::failed(other),
    }
}

/// A sandbox with its standing.
#[derive(serde::Serialize)]
struct Listed<'a> {
    id: &'a str,
    name: &'a str,
    image: &'a str,
    state: &'a str,
    run_id: Option<&'a str>,
    node: Option<&'a str>,
    run_status: Option<RunStatus>,
    standing: Standing,
}

/// Every Boitata sandbox with the status of its run in the local store and its
/// standing.
async fn survey(
    global: &GlobalArgs,
) -> Result<
    (
        DockerBackend,
        Vec<(SandboxInfo, Option<RunStatus>, Standing)>,
    ),
    CliError,
> {
    let config = session::load_config(global)?;
    let store = session::open_store(&config)?;
    let backend = DockerBackend::from_env();
    let sandboxes = backend
        .list(&Default::default())
        .await
        .map_err(sandbox_error)?;
    let mut judged = Vec::with_capacity(sandboxes.len());
    for info in sandboxes {
        let status = run_status(store.as_ref(), info.run_id())?;
        let standing = reaper::judge(&info, status);
        judged.push((info, status, standing));
    }
    Ok((backend, judged))
}

fn run_status(store: &dyn RunStore, run_id: Option<&str>) -> Result<Option<RunStatus>, CliError> {
    let Some(run_id) = run_id else {
        return Ok(None);
    };
    match store.run(run_id) {
        Ok(run) => Ok(Some(run.status)),
        Err(StoreError::NotFound(_)) => Ok(None),
        Err(e) => Err(CliError::failed(e)),
    }
}

fn standing_word(standing: Standing) -> &'static str {
    match standing {
        Standing::Live => "live",
        Standing::Orphan => "orphan",
        Standing::Unknown => "elsewhere",
    }
}

/// `boitata sandbox list [--json]`.
pub(crate) async fn list(global: &GlobalArgs, args: SandboxListArgs) -> Result<u8, CliError> {
    let (_, judged) = survey(global).await?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let listed: Vec<Listed<'_>> = judged
            .iter()
            .map(|(info, status, standing)| Listed {
                id: info.id.as_str(),
                name: &info.name,
                image: &info.image,
                state: &info.state,
                run_id: info.run_id(),
                node: info.node(),
                run_status: *status,
                standing: *standing,
            })
            .collect();
        let text = serde_json::to_string_pretty(&listed).map_err(CliError::failed)?;
        let _ = writeln!(out, "{text}");
        return Ok(0);
    }
    if judged.is_empty() {
        let _ = writeln!(out, "no sandboxes");
        return Ok(0);
    }
    let _ = writeln!(
        out,
        "{:<12}  {:<9}  {:<8}  {:<36}  {:<12}  IMAGE",
        "SANDBOX", "STANDING", "STATE", "RUN", "NODE"
    );
    for (info, _, standing) in &judged {
        let _ = writeln!(
            out,
            "{:<12}  {:<9}  {:<8}  {:<36}  {:<12}  {}",
            info.id.short(),
            standing_word(*standing),
            info.state,
            info.run_id().unwrap_or("-"),
            info.node().unwrap_or("-"),
            info.image
        );
    }
    Ok(0)
}

/// `boitata sandbox gc [--dry-run]`: removes every orphan (see
/// [`reaper::judge`]); keeps live sandboxes and those made on other machines.
pub(crate) async fn gc(global: &GlobalArgs, args: SandboxGcArgs) -> Result<u8, CliError> {
    let (backend, judged) = survey(global).await?;
    let mut out = std::io::stdout().lock();
    let mut failed = 0;
    let (mut removed, mut kept) = (0, 0);
    for (info, _, standing) in &judged {
        if *standing != Standing::Orphan {
            kept += 1;
            continue;
        }
        let run = info.run_id().unwrap_or("-");
        if args.dry_run {
            let _ = writeln!(out, "would remove {} (run {run})", info.id.short());
            removed += 1;
            continue;
        }
        match backend.destroy(&info.id).await {
            Ok(()) => {
                let _ = writeln!(out, "removed {} (run {run})", info.id.short());
                removed += 1;
            }
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "error: cannot remove {}: {e}",
                    info.id.short()
                );
                failed += 1;
            }
        }
    }
    let config = session::load_config(global)?;
    let store = session::open_store(&config)?;
    // A run network is kept while its run may still use it (the same judgement as
    // its sandboxes').
    let network_is_live = |network: &boitata_orchestrator::RunNetworkInfo| {
        let status = network
            .run_id()
            .and_then(|run| store.run(run).ok())
            .map(|run| run.status);
        reaper::judge_labels(&network.labels, status) != Standing::Orphan
    };
    if args.dry_run {
        for network in backend
            .list_run_networks()
            .await
            .map_err(sandbox_error)?
            .iter()
            .filter(|network| !network_is_live(network))
        {
            let run = network.run_id().unwrap_or("-");
            let _ = writeln!(
                out,
                "would remove network {} (run {run}) and its host rules",
                network.name
            );
        }
    } else {
        // Then the run networks and host rules the removed sandboxes' runs left.
        let networks = reaper::gc_networks_where(&backend, network_is_live)
            .await
            .map_err(sandbox_error)?;
        for network in &networks.removed {
            let run = network.run_id().unwrap_or("-");
            let _ = writeln!(
                out,
                "removed network {} (run {run}) and its host rules",
                network.name
            );
        }
        for run in &networks.stray_rules_removed {
            let _ = writeln!(out, "removed the host rules left by run {run}");
        }
        for (what, e) in &networks.failed {
            let _ = writeln!(std::io::stderr(), "error: cannot remove {what}: {e}");
            failed += 1;
        }
        for run in crate::runs::mark_interrupted_runs(&store)? {
            let _ = writeln!(
                out,
                "marked run {} failed (interrupted: its process is gone)",
                run.id
            );
        }
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let _ = writeln!(
        out,
        "{verb} {removed} orphaned sandbox{}; kept {kept}",
        if removed == 1 { "" } else { "es" }
    );
    Ok(if failed > 0 { EXIT_FAILED } else { 0 })
}
