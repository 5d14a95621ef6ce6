//! The node interface: how the executor hands a node to whatever runs it.
//!
//! A [`NodeHandler`] runs one kind of node ([`HandlerKind`]). The executor is given a
//! [`NodeHandlers`] registry; this crate registers the host kinds (`exec` without a
//! `container`, `agent`) with [`NodeHandlers::host`], and a sandbox backend registers
//! the others (`provision`, `checkout`, `exec` in a container, `agent_sandbox`) from
//! its own crate, without changes here.
//!
//! A handler gets the node with every placeholder already substituted and a
//! [`NodeContext`]: the run and node ids, the event [`Emitter`], a cancellation token
//! (fired on run cancellation *and* on the node's timeout), the host workspace, the
//! settings to build an agent from (lazily: a blueprint without agent nodes needs no
//! API key), and a [`Teardown`] to register cleanup that must run when the run ends,
//! however it ends (success, failure, cancellation, or a panic in a node).
//!
//! ```no_run
//! use async_trait::async_trait;
//! use boitata_blueprint::{HandlerKind, Node, NodeContext, NodeError, NodeHandler, NodeHandlers, NodeOutcome};
//!
//! struct Echo;
//!
//! #[async_trait]
//! impl NodeHandler for Echo {
//!     async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
//!         Ok(NodeOutcome::success(format!("{} ran in run {}", node.id, ctx.run_id())))
//!     }
//! }
//!
//! let mut handlers = NodeHandlers::host();
//! handlers.register(HandlerKind::Provision, std::sync::Arc::new(Echo));
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use boitata_core::budget::BudgetMeter;
use boitata_core::config::{Config, EnvSource};
use boitata_core::runtime::Runtime;
use boitata_core::{Emitter, Outcome, RunStatus};
use boitata_provider::ProviderError;
use tokio_util::sync::CancellationToken;

use crate::model::{HandlerKind, Node};

/// Runs one kind of node.
#[async_trait]
pub trait NodeHandler: Send + Sync {
    /// Runs `node` (its placeholders already substituted) and reports how it ended.
    ///
    /// Emit progress (`exec_output`, `agent_message`, …) on `ctx.emitter()` with
    /// `Some(ctx.node_id())`; the executor emits `node_started` and `node_finished`.
    /// When `ctx.cancel()` fires (run cancelled or node timed out), stop promptly,
    /// release what the node holds (kill processes), and return, either
    /// [`NodeError::Cancelled`] or the partial outcome; the executor decides what the
    /// run does next. A panic fails the run, not the process.
    ///
    /// # Errors
    /// [`NodeError`] when the node could not run to an outcome of its own (the command
    /// could not start, the model API failed, the backend is down). The run then fails.
    async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError>;
}

/// How a node ended, as its handler reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOutcome {
    /// Success or failure; routes `success` / `failure` edges.
    pub outcome: Outcome,
    /// The exit code, for nodes that run a command; routes integer `when` edges.
    pub exit_code: Option<i64>,
    /// The node's output, for `{NODE}` placeholders (stdout tail, final message,
    /// sandbox id).
    pub output: String,
    /// Why the node failed, when its output and exit code do not say (an agent that
    /// ran out of turns); shown as `node_finished.error` and in the run's error.
    pub error: Option<String>,
}

impl NodeOutcome {
    /// A successful outcome with `output` and no exit code.
    pub fn success(output: impl Into<String>) -> Self {
        NodeOutcome {
            outcome: Outcome::Success,
            exit_code: None,
            output: output.into(),
            error: None,
        }
    }

    /// A failed outcome with `output` and no exit code.
    pub fn failure(output: impl Into<String>) -> Self {
        NodeOutcome {
            outcome: Outcome::Failure,
            exit_code: None,
            output: output.into(),
            error: None,
        }
    }

    /// A command's outcome: success iff `exit_code` is 0.
    pub fn from_exit_code(exit_code: i64, output: impl Into<String>) -> Self {
        NodeOutcome {
            outcome: if exit_code == 0 {
                Outcome::Success
            } else {
                Outcome::Failure
            },
            exit_code: Some(exit_code),
            output: output.into(),
            error: None,
        }
    }

    /// This outcome with `error` saying why the node failed.
    pub fn with_error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }
}

/// Why a node could not run to an outcome. Any of these fails the run.
///
/// The executor names the node in the run's error: `node "ID": MESSAGE`, unless the
/// message already starts with `node "ID"`.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The handler stopped because `ctx.cancel()` fired.
    #[error("cancelled")]
    Cancelled,
    /// An I/O operation failed; `action` says which (`cannot start sh -c ...`).
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The agent's model API failed or an event could not be recorded.
    #[error(transparent)]
    Agent(#[from] boitata_core::agent::AgentError),
    /// The provider could not be built (a missing API key names the variable to set).
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// An event could not be recorded.
    #[error(transparent)]
    Event(#[from] boitata_core::event::SinkError),
    /// The node is misconfigured in a way only visible at run time.
    #[error("{0}")]
    Invalid(String),
    /// Another crate's error (a sandbox backend's, say), kept whole for `downcast_ref`.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl NodeError {
    /// Wraps another crate's error.
    pub fn other(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        NodeError::Other(Box::new(error))
    }
}

/// The handlers an executor may use, by [`HandlerKind`].
#[derive(Clone, Default)]
pub struct NodeHandlers {
    handlers: BTreeMap<HandlerKind, Arc<dyn NodeHandler>>,
}

impl std::fmt::Debug for NodeHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.handlers.keys()).finish()
    }
}

impl NodeHandlers {
    /// No handlers.
    pub fn empty() -> Self {
        NodeHandlers::default()
    }

    /// The host handlers of this crate: [`HostExec`](crate::host::HostExec) and
    /// [`HostAgent`](crate::host::HostAgent).
    pub fn host() -> Self {
        let mut handlers = NodeHandlers::empty();
        handlers.register(HandlerKind::HostExec, Arc::new(crate::host::HostExec));
        handlers.register(HandlerKind::Agent, Arc::new(crate::host::HostAgent));
        handlers
    }

    /// Registers (or replaces) the handler for `kind`.
    pub fn register(&mut self, kind: HandlerKind, handler: Arc<dyn NodeHandler>) -> &mut Self {
        self.handlers.insert(kind, handler);
        self
    }

    /// The handler for `kind`, if one is registered.
    pub fn get(&self, kind: HandlerKind) -> Option<&Arc<dyn NodeHandler>> {
        self.handlers.get(&kind)
    }
}

/// A boxed cleanup future for [`Teardown::defer`].
pub type CleanupFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Cleanup registered during a run, run once when the run ends (success, failure,
/// cancellation, a panic in a node), most recent first, each in its own task (a
/// panicking cleanup does not stop the others). Cheap to clone; clones share a list.
#[derive(Clone, Default)]
pub struct Teardown {
    pending: Arc<Mutex<Vec<(String, CleanupFuture)>>>,
}

impl std::fmt::Debug for Teardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_list()
            .entries(pending.iter().map(|(label, _)| label))
            .finish()
    }
}

impl Teardown {
    /// Registers `cleanup` (described by `label` in logs, e.g. `destroy sandbox 3f2a…`).
    /// Register right after acquiring the resource, before anything that may fail.
    pub fn defer(
        &self,
        label: impl Into<String>,
        cleanup: impl Future<Output = ()> + Send + 'static,
    ) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.push((label.into(), Box::pin(cleanup)));
    }

    /// Takes every registered cleanup, most recent first.
    pub(crate) fn take(&self) -> Vec<(String, CleanupFuture)> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let mut taken = std::mem::take(&mut *pending);
        taken.reverse();
        taken
    }
}

/// Where agents come from: settings to build a provider from on first use, or a
/// runtime built already (tests with a fake provider).
#[derive(Clone)]
pub enum RuntimeSource {
    /// Build with [`Runtime::from_config`] when a node first needs it.
    Config {
        /// The settings (provider, agent limits, tool limits).
        config: Config,
        /// The environment (API keys, the allowlisted command environment).
        env: Arc<dyn EnvSource + Send + Sync>,
    },
    /// Use this runtime.
    Ready(Runtime),
}

impl std::fmt::Debug for RuntimeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeSource::Config { config, .. } => f
                .debug_struct("Config")
                .field("provider", &config.provider.kind.as_str())
                .finish_non_exhaustive(),
            RuntimeSource::Ready(runtime) => f.debug_tuple("Ready").field(runtime).finish(),
        }
    }
}

impl RuntimeSource {
    /// The settings.
    pub fn config(&self) -> &Config {
        match self {
            RuntimeSource::Config { config, .. } => config,
            RuntimeSource::Ready(runtime) => runtime.config(),
        }
    }

    /// The value of environment variable `name` in the run's environment, if set.
    /// For a [`RuntimeSource::Ready`] runtime only the allowlisted command environment
    /// is known.
    pub fn env_var(&self, name: &str) -> Option<String> {
        match self {
            RuntimeSource::Config { env, .. } => env.var(name),
            RuntimeSource::Ready(runtime) => runtime.command_env().get(name).cloned(),
        }
    }
}

/// The shared, per-run part of a [`NodeContext`].
pub(crate) struct RunScope {
    pub(crate) run_id: String,
    pub(crate) blueprint: String,
    pub(crate) task: String,
    pub(crate) workspace: PathBuf,
    pub(crate) emitter: Emitter,
    pub(crate) runtime_source: RuntimeSource,
    pub(crate) runtime: Mutex<Option<Runtime>>,
    pub(crate) teardown: Teardown,
    pub(crate) budget: BudgetMeter,
}

/// What a handler knows about the run and the node it is running.
#[derive(Clone)]
pub struct NodeContext {
    pub(crate) run: Arc<RunScope>,
    pub(crate) node_id: String,
    pub(crate) visit: u32,
    pub(crate) cancel: CancellationToken,
}

impl std::fmt::Debug for NodeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeContext")
            .field("run_id", &self.run.run_id)
            .field("node_id", &self.node_id)
            .field("visit", &self.visit)
            .finish_non_exhaustive()
    }
}

impl NodeContext {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run.run_id
    }

    /// The blueprint's name.
    pub fn blueprint(&self) -> &str {
        &self.run.blueprint
    }

    /// The node's id (tag every event with it).
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Which visit of this node this is, from 1.
    pub fn visit(&self) -> u32 {
        self.visit
    }

    /// The run's task string.
    pub fn task(&self) -> &str {
        &self.run.task
    }

    /// The host workspace (where host commands and the host agent work).
    pub fn workspace(&self) -> &Path {
        &self.run.workspace
    }

    /// The run's event emitter.
    pub fn emitter(&self) -> &Emitter {
        &self.run.emitter
    }

    /// Fires when the node must stop: the run was cancelled or the node timed out.
    pub fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    /// The run's budget meter: every model request of the run (host agents, and the
    /// model gateway for agents in sandboxes) is admitted and charged by it. Its
    /// budget is the blueprint's `budget:`, else the config's `[budget]`; its wall
    /// clock started with the run.
    pub fn budget(&self) -> &BudgetMeter {
        &self.run.budget
    }

    /// Cleanup to run when the run ends.
    pub fn teardown(&self) -> &Teardown {
        &self.run.teardown
    }

    /// The settings (provider, agent and tool limits).
    pub fn config(&self) -> &Config {
        self.run.runtime_source.config()
    }

    /// An environment variable of the run's environment (for a backend that must
    /// pass provider credentials to an agent's launch environment, say).
    pub fn env_var(&self, name: &str) -> Option<String> {
        self.run.runtime_source.env_var(name)
    }

    /// The runtime (provider and tools), built on first use and shared by the run's
    /// nodes.
    ///
    /// # Errors
    /// [`ProviderError`] when the provider cannot be built, e.g. a missing API key
    /// (the message names the variable to set).
    pub fn runtime(&self) -> Result<Runtime, ProviderError> {
        let mut cached = self.run.runtime.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(runtime) = cached.as_ref() {
            return Ok(runtime.clone());
        }
        let runtime = match &self.run.runtime_source {
            RuntimeSource::Ready(runtime) => runtime.clone(),
            RuntimeSource::Config { config, env } => {
                Runtime::from_config(config.clone(), env.as_ref())?
            }
        };
        *cached = Some(runtime.clone());
        Ok(runtime)
    }
}

/// How a run ended, as [`RunHooks::run_ending`] sees it.
#[derive(Debug, Clone)]
pub struct RunEnding<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// The blueprint's name.
    pub blueprint: &'a str,
    /// The status the run is about to finish with.
    pub status: RunStatus,
    /// The run's emitter (for events such as `sandbox_destroyed`).
    pub emitter: &'a Emitter,
}

/// Code that runs at the start and the end of every run of an executor (a sandbox
/// backend's guaranteed teardown, say). `run_ending` is always called once the walk
/// ends, whatever ended it, before `run_finished` is emitted; a panic inside it is
/// caught and logged.
#[async_trait]
pub trait RunHooks: Send + Sync {
    /// Called after `run_started` is emitted, before the first node.
    async fn run_starting(&self, run_id: &str, emitter: &Emitter) {
        let _ = (run_id, emitter);
    }

    /// Called when the walk has ended, after the cleanups registered with
    /// [`Teardown::defer`] have run.
    async fn run_ending(&self, run: &RunEnding<'_>);
}
