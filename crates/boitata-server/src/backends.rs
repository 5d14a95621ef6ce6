//! What runs a blueprint's nodes in the server: the executor (with its node handlers
//! and run hooks) and the orphan reaper for sandboxes left by a crash.
//!
//! [`Backends::standard`] is the one place that wires them: the host handlers of
//! `boitata-blueprint` (`exec` without a container, `agent`), plus the sandbox
//! handlers of `boitata-orchestrator` ([`SandboxNodes`]: `provision`, `checkout`,
//! `exec` in a container, and `agent_sandbox` once it lands there) with the run hook
//! that destroys a run's sandboxes when it ends. A new backend or node type is one
//! more `register` line there. Tests use [`Backends::host_only`] or build their own.

use std::sync::Arc;

use async_trait::async_trait;
use boitata_blueprint::{Executor, NodeHandlers};
use boitata_core::store::RunStore;
use boitata_orchestrator::reaper::{gc_networks_where, gc_where, judge, judge_labels, Standing};
use boitata_orchestrator::{DockerBackend, Sandbox, SandboxError, SandboxNodes};

/// The executor runs use, and how to reap sandboxes at start.
#[derive(Clone)]
pub struct Backends {
    /// Runs blueprints (the same executor type the CLI uses).
    pub executor: Executor,
    /// Removes sandboxes left behind by runs that did not end cleanly; `None` when
    /// no sandbox backend is configured.
    pub reaper: Option<Arc<dyn OrphanReaper>>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends")
            .field("executor", &self.executor)
            .field("reaper", &self.reaper.as_ref().map(|r| r.name()))
            .finish()
    }
}

impl Backends {
    /// Host nodes only (`exec` without a container, `agent`), no reaper.
    pub fn host_only() -> Self {
        Backends {
            executor: Executor::new(NodeHandlers::host()),
            reaper: None,
        }
    }

    /// Host nodes plus the Docker sandbox nodes (`provision`, `checkout`, `exec` in a
    /// container) with their guaranteed teardown, on `DOCKER_HOST` or the default
    /// socket. The backend connects on first use, so a server whose runs never
    /// provision a sandbox never needs a daemon.
    pub fn standard() -> Self {
        let backend: Arc<dyn Sandbox> = Arc::new(DockerBackend::from_env());
        let sandboxes = SandboxNodes::new(backend.clone());
        let mut handlers = NodeHandlers::host();
        sandboxes.register(&mut handlers);
        Backends {
            executor: Executor::new(handlers).with_hook(sandboxes.hook()),
            reaper: Some(Arc::new(SandboxReaper { backend })),
        }
    }
}

/// What a reaper pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Sandboxes destroyed.
    pub removed: usize,
    /// Sandboxes (and run networks or host rules, after the sandboxes) that should
    /// have been removed but could not be, with why.
    pub failed: Vec<String>,
}

/// Removes sandboxes whose run can no longer tear them down.
#[async_trait]
pub trait OrphanReaper: Send + Sync {
    /// A name for logs (`docker`).
    fn name(&self) -> &str;

    /// Destroys the sandboxes whose run has ended in `store` (the runs just marked
    /// interrupted included) or whose owner process on this machine is gone; keeps
    /// the others.
    ///
    /// # Errors
    /// A one-line reason when the backend cannot be reached or listed.
    async fn reap(&self, store: &dyn RunStore) -> Result<ReapReport, String>;
}

/// The reaper over a [`Sandbox`] backend: `boitata-orchestrator`'s reaper, judging
/// each sandbox by its run's status in the store ([`judge`]).
pub struct SandboxReaper {
    /// The backend.
    pub backend: Arc<dyn Sandbox>,
}

#[async_trait]
impl OrphanReaper for SandboxReaper {
    fn name(&self) -> &str {
        self.backend.backend_name()
    }

    async fn reap(&self, store: &dyn RunStore) -> Result<ReapReport, String> {
        let report = gc_where(self.backend.as_ref(), |info| {
            let status = info
                .run_id()
                .and_then(|run| store.run(run).ok())
                .map(|run| run.status);
            judge(info, status) != Standing::Orphan
        })
        .await
        .map_err(|e: SandboxError| e.to_string())?;
        let networks = gc_networks_where(self.backend.as_ref(), |network| {
            let status = network
                .run_id()
                .and_then(|run| store.run(run).ok())
                .map(|run| run.status);
            judge_labels(&network.labels, status) != Standing::Orphan
        })
        .await
        .map_err(|e: SandboxError| e.to_string())?;
        Ok(ReapReport {
            removed: report.removed.len(),
            failed: report
                .failed
                .iter()
                .map(|(info, e)| format!("{}: {e}", info.id.short()))
                .chain(
                    networks
                        .failed
                        .iter()
                        .map(|(what, e)| format!("{what}: {e}")),
                )
                .collect(),
        })
    }
}
