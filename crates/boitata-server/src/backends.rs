//! What runs a blueprint's nodes in the server: the executor (with its node handlers
//! and run hooks) and the orphan reaper for sandboxes left by a crash.
//!
//! [`Backends::standard`] is the one place that wires them: the host handlers of
//! `boitata-blueprint` (`exec` without a container, `agent`), plus the sandbox
//! handlers of `boitata-orchestrator` (`provision`, `checkout`, `exec` in a container,
//! `agent_sandbox`) registered in [`register_sandbox_handlers`]. Tests use
//! [`Backends::host_only`] or build their own.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use boitata_blueprint::{Executor, NodeHandlers};
use boitata_orchestrator::reaper::{gc_where, owner_process_alive};
use boitata_orchestrator::{DockerBackend, Sandbox, SandboxError};

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

    /// Host nodes plus the Docker sandbox backend (`DOCKER_HOST` or the default
    /// socket; it connects on first use, so a server whose runs never provision a
    /// sandbox never needs a daemon).
    pub fn standard() -> Self {
        let docker = Arc::new(DockerBackend::from_env());
        let backend: Arc<dyn Sandbox> = docker.clone();
        let mut handlers = NodeHandlers::host();
        let mut executor_hooks = Vec::new();
        register_sandbox_handlers(&mut handlers, &mut executor_hooks, &docker);
        let executor = executor_hooks
            .into_iter()
            .fold(Executor::new(handlers), Executor::with_hook);
        Backends {
            executor,
            reaper: Some(Arc::new(SandboxReaper { backend })),
        }
    }
}

/// Registers the sandbox node handlers and their run hooks (guaranteed teardown) on
/// `docker`. This is the one line to change when `boitata-orchestrator`'s handlers
/// land: `boitata_orchestrator::handlers::register(handlers, hooks, docker.clone())`.
/// Until then sandbox nodes have no handler, so blueprints that use them are reported
/// at start and not offered.
fn register_sandbox_handlers(
    _handlers: &mut NodeHandlers,
    _hooks: &mut Vec<Arc<dyn boitata_blueprint::RunHooks>>,
    _docker: &Arc<DockerBackend>,
) {
}

/// Which runs a reaper must spare and which it may clean up after.
#[derive(Debug, Clone, Default)]
pub struct ReapScope {
    /// Runs still live in the store (some other process executes them): their
    /// sandboxes stay.
    pub live: HashSet<String>,
    /// Runs this server just marked interrupted: their sandboxes go.
    pub interrupted: HashSet<String>,
}

/// What a reaper pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Sandboxes destroyed.
    pub removed: usize,
    /// Sandboxes that should have been destroyed but could not be, with why.
    pub failed: Vec<String>,
}

/// Removes sandboxes whose run can no longer tear them down.
#[async_trait]
pub trait OrphanReaper: Send + Sync {
    /// A name for logs (`docker`).
    fn name(&self) -> &str;

    /// Destroys the sandboxes of `scope.interrupted` runs, and those whose owning
    /// process (on this machine) is gone, sparing `scope.live` runs.
    ///
    /// # Errors
    /// A one-line reason when the backend cannot be reached or listed.
    async fn reap(&self, scope: &ReapScope) -> Result<ReapReport, String>;
}

/// The reaper over a [`Sandbox`] backend, using `boitata-orchestrator`'s reaper.
pub struct SandboxReaper {
    /// The backend.
    pub backend: Arc<dyn Sandbox>,
}

#[async_trait]
impl OrphanReaper for SandboxReaper {
    fn name(&self) -> &str {
        self.backend.backend_name()
    }

    async fn reap(&self, scope: &ReapScope) -> Result<ReapReport, String> {
        let result = gc_where(self.backend.as_ref(), |info| {
            let run = info.run_id();
            if run.is_some_and(|r| scope.live.contains(r)) {
                return true;
            }
            if run.is_some_and(|r| scope.interrupted.contains(r)) {
                return false;
            }
            // Not one of ours: spare it unless its owner process is known to be gone.
            owner_process_alive(info) != Some(false)
        })
        .await;
        let report = result.map_err(|e: SandboxError| e.to_string())?;
        Ok(ReapReport {
            removed: report.removed.len(),
            failed: report
                .failed
                .iter()
                .map(|(info, e)| format!("{}: {e}", info.id.short()))
                .collect(),
        })
    }
}
