//! The sandbox node types, as [`NodeHandler`](boitata_blueprint::NodeHandler)s for the blueprint executor:
//! [`provision`], [`checkout`], [`exec`] with a `container`, and [`agent_sandbox`].
//!
//! [`SandboxNodes`] registers them in a [`NodeHandlers`] registry and is itself the
//! [`RunHooks`] that guarantees teardown: every sandbox a run provisioned is destroyed
//! when the run ends (success, failure, cancellation, a panic in a node), with a
//! `sandbox_destroyed` event each.
//!
//! ```no_run
//! use std::sync::Arc;
//! use boitata_blueprint::{Executor, NodeHandlers};
//! use boitata_orchestrator::{DockerBackend, SandboxNodes};
//!
//! let sandboxes = SandboxNodes::new(Arc::new(DockerBackend::from_env()));
//! let mut handlers = NodeHandlers::host();
//! sandboxes.register(&mut handlers);
//! let executor = Executor::new(handlers).with_hook(sandboxes.hook());
//! ```
//!
//! A node may only use sandboxes its own run provisioned: `container: "{box}"` names
//! the output of a `provision` node of the same run, and any other id is refused.

mod agent_process;
pub mod agent_sandbox;
pub mod checkout;
pub mod exec;
mod model_access;
mod output;
pub mod provision;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use boitata_blueprint::{
    Blueprint, HandlerKind, NodeContext, NodeError, NodeHandlers, RunEnding, RunHooks,
};

use crate::gateway::{GatewayError, ModelGateway};
use crate::sandbox::{Sandbox, SandboxId};
use crate::tracking::RunSandboxes;

/// The port published (on host loopback) by every `provision` node on the `bridge`
/// network, where an `agent_sandbox` node expects the in-sandbox agent by default.
pub const DEFAULT_AGENT_PORT: u16 = 7700;

/// The sandbox node handlers of one backend, and the per-run record of the sandboxes
/// they made. Cheap to clone (`Arc`).
#[derive(Clone)]
pub struct SandboxNodes {
    shared: Arc<Shared>,
}

struct Shared {
    backend: Arc<dyn Sandbox>,
    runs: Mutex<HashMap<String, RunSandboxes>>,
    /// The model gateway, made when an agent first needs it.
    gateway: Mutex<Option<ModelGateway>>,
    /// Each live run's gateway token, by run id.
    gateway_tokens: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for SandboxNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxNodes")
            .field("backend", &self.shared.backend.backend_name())
            .finish_non_exhaustive()
    }
}

impl SandboxNodes {
    /// Sandbox nodes on `backend` (which should connect lazily: nothing here touches it
    /// until a sandbox node runs).
    pub fn new(backend: Arc<dyn Sandbox>) -> Self {
        SandboxNodes {
            shared: Arc::new(Shared {
                backend,
                runs: Mutex::new(HashMap::new()),
                gateway: Mutex::new(None),
                gateway_tokens: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Sandbox> {
        &self.shared.backend
    }

    /// The model gateway through which agents in this backend's sandboxes reach the
    /// model (one per process: made on first use, then shared).
    ///
    /// # Errors
    /// [`GatewayError::Client`] when its HTTP client cannot be built.
    pub fn gateway(&self) -> Result<ModelGateway, GatewayError> {
        let mut gateway = self
            .shared
            .gateway
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = gateway.as_ref() {
            return Ok(existing.clone());
        }
        let made = ModelGateway::new()?;
        *gateway = Some(made.clone());
        Ok(made)
    }

    fn lock_gateway_tokens(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.shared
            .gateway_tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Registers the `provision`, `checkout`, in-container `exec` and `agent_sandbox`
    /// handlers.
    pub fn register(&self, handlers: &mut NodeHandlers) {
        handlers.register(
            HandlerKind::Provision,
            Arc::new(provision::Provision::new(self.clone())),
        );
        handlers.register(
            HandlerKind::Checkout,
            Arc::new(checkout::Checkout::new(self.clone())),
        );
        handlers.register(
            HandlerKind::SandboxExec,
            Arc::new(exec::SandboxExec::new(self.clone())),
        );
        handlers.register(
            HandlerKind::AgentSandbox,
            Arc::new(agent_sandbox::AgentSandbox::new(self.clone())),
        );
    }

    /// The hook to add to the executor ([`Executor::with_hook`](boitata_blueprint::Executor::with_hook))
    /// so that every run's sandboxes are destroyed when it ends.
    pub fn hook(&self) -> Arc<dyn RunHooks> {
        Arc::new(self.clone())
    }

    /// The tracker of the run `ctx` belongs to, made (with its teardown registered on
    /// the run) on first use.
    pub(crate) fn run_sandboxes(&self, ctx: &NodeContext) -> RunSandboxes {
        let mut runs = self.lock();
        if let Some(existing) = runs.get(ctx.run_id()) {
            return existing.clone();
        }
        let tracker = RunSandboxes::new(self.shared.backend.clone(), ctx.emitter().clone());
        runs.insert(ctx.run_id().to_owned(), tracker.clone());
        // Also registered as a run cleanup, so that it runs even if the run's future is
        // dropped before its hooks are called.
        let this = self.clone();
        let run_id = ctx.run_id().to_owned();
        let deferred = tracker.clone();
        ctx.teardown().defer(
            format!("destroy the sandboxes of run {run_id}"),
            async move {
                deferred.teardown().await;
                this.lock().remove(&run_id);
            },
        );
        tracker
    }

    /// The sandbox named `container` by `node`, if the node's run provisioned it.
    ///
    /// # Errors
    /// [`NodeError::Invalid`] naming the node and the id when the run has no such
    /// sandbox.
    pub(crate) fn sandbox_of_run(
        &self,
        ctx: &NodeContext,
        container: &str,
    ) -> Result<SandboxId, NodeError> {
        let container = container.trim();
        let known = self
            .lock()
            .get(ctx.run_id())
            .map(|run| run.live())
            .unwrap_or_default();
        known
            .into_iter()
            .find(|id| id.as_str() == container)
            .ok_or_else(|| {
                NodeError::Invalid(format!(
                    "node {:?}: container {container:?} is not a sandbox of this run; \
                     set container to the output of a provision node, e.g. \"{{box}}\"",
                    ctx.node_id()
                ))
            })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RunSandboxes>> {
        self.shared.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl RunHooks for SandboxNodes {
    async fn run_ending(&self, run: &RunEnding<'_>) {
        let tracker = self.lock().remove(run.run_id);
        if let Some(tracker) = tracker {
            let report = tracker.teardown().await;
            for (id, e) in &report.failed {
                tracing::error!(
                    run = run.run_id,
                    sandbox = %id.short(),
                    "sandbox not destroyed (`boitata sandbox gc` will): {e}"
                );
            }
        }
    }
}

/// Whether running `blueprint` needs a sandbox backend (it has a `provision`,
/// `checkout`, `agent_sandbox` node or an `exec` with `container`). A blueprint that
/// does not can run without any daemon.
pub fn needs_sandbox(blueprint: &Blueprint) -> bool {
    blueprint
        .nodes
        .iter()
        .any(|node| node.handler_kind().needs_sandbox())
}
