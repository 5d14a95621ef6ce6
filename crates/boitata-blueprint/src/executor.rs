//! The executor: walks a blueprint's graph from `entry`, running each node with its
//! [`NodeHandler`](crate::NodeHandler).
//!
//! After a node ends, its edges are tried in file order and the first whose `when`
//! matches is taken; an edge to `END`, or no matching edge, ends the walk. A node may
//! be entered `max_visits` times (default 1) and a run may take `max_steps` steps
//! (default 100); going over either fails the run, naming the node. A node that runs
//! longer than its `timeout` is stopped and ends as a `failure` (so `failure` edges
//! may route it). A node error or a panic fails the run. Cancelling the run's token
//! stops the running node and ends the run `cancelled`.
//!
//! The run's status is the outcome of the last node run: `succeeded` or `failed`
//! (cancellation overrides). Events: `run_started`, then `node_started` /
//! `node_finished` for every node, then `run_finished` once every cleanup registered
//! by a node ([`Teardown`](crate::Teardown::defer)) and every [`RunHooks::run_ending`] has run.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boitata_core::budget::BudgetMeter;
use boitata_core::event::truncate_with_marker;
use boitata_core::{Emitter, EventPayload, Outcome, RunStatus};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::model::{Blueprint, HandlerKind, Node, NodeSpec, NodeType, END};
use crate::node::{
    NodeContext, NodeError, NodeHandlers, NodeOutcome, RunEnding, RunHooks, RunScope,
    RuntimeSource, Teardown,
};
use crate::params::{self, ParamProblem};
use crate::template::{self, Scope};

/// How many bytes of a node's output go into `node_finished.output_preview`.
pub const OUTPUT_PREVIEW_BYTES: usize = 4 * 1024;

/// How many bytes of what a node runs go into `node_started.detail`.
pub const STARTED_DETAIL_BYTES: usize = 2 * 1024;

/// What a node runs, for `node_started.detail`: the command of an `exec`, the prompt
/// of an agent, the image of a `provision`, the repository (and ref) of a
/// `checkout`; cut to [`STARTED_DETAIL_BYTES`].
fn started_detail(rendered: &Node) -> String {
    let detail = match &rendered.spec {
        NodeSpec::Exec(exec) => exec.command.clone(),
        NodeSpec::Agent(agent) => agent.prompt.clone(),
        NodeSpec::AgentSandbox(agent) => agent.prompt.clone(),
        NodeSpec::Provision(provision) => provision.image.clone(),
        NodeSpec::Checkout(checkout) => match &checkout.git_ref {
            Some(git_ref) => format!("{} at {git_ref}", checkout.repo),
            None => checkout.repo.clone(),
        },
    };
    truncate_with_marker(&detail, STARTED_DETAIL_BYTES)
}

/// Tunables of an [`Executor`].
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// How long a node may take to stop after its cancellation token fires, before its
    /// task is aborted.
    pub cancel_grace: Duration,
    /// How long each registered cleanup and each [`RunHooks::run_ending`] may take.
    pub cleanup_timeout: Duration,
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        ExecutorOptions {
            cancel_grace: Duration::from_secs(10),
            cleanup_timeout: Duration::from_secs(120),
        }
    }
}

/// What a run needs besides the blueprint.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The task string (`{task}`).
    pub task: String,
    /// Param values (`--param NAME=VALUE`); defaults fill the rest.
    pub params: BTreeMap<String, String>,
    /// The host workspace: where host `exec` runs and the host agent works.
    pub workspace: PathBuf,
    /// Where agents come from.
    pub runtime: RuntimeSource,
    /// The run's emitter; its run id is the run's id (`{run.id}`).
    pub emitter: Emitter,
    /// Cancels the run (Ctrl-C, SIGTERM, an API call).
    pub cancel: CancellationToken,
}

/// One node run by the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The node.
    pub node: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Its exit code, for commands.
    pub exit_code: Option<i64>,
    /// Why it failed, when it did not end with an outcome of its own (timeout, error,
    /// cancellation, panic).
    pub error: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// `succeeded`, `failed` or `cancelled`.
    pub status: RunStatus,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// Every node run, in order.
    pub steps: Vec<Step>,
    /// The output of each node's latest visit.
    pub outputs: BTreeMap<String, String>,
    /// The output of the last node run (the CLI prints it).
    pub last_output: Option<String>,
}

/// A node with no handler for its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingHandler {
    /// The node.
    pub node: String,
    /// Its type.
    pub node_type: NodeType,
    /// The handler kind it needs.
    pub kind: HandlerKind,
}

impl fmt::Display for MissingHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind.needs_sandbox() {
            write!(
                f,
                "node {:?}: type {} needs a sandbox backend, and none is configured for this run",
                self.node,
                match self.kind {
                    HandlerKind::SandboxExec => "exec with container",
                    _ => self.node_type.as_str(),
                }
            )
        } else {
            write!(
                f,
                "node {:?}: no handler for {} is registered",
                self.node, self.kind
            )
        }
    }
}

/// One reason a run cannot start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunProblem {
    /// A param is missing or undeclared.
    Param(ParamProblem),
    /// A node has no handler (a sandbox node without a sandbox backend).
    MissingHandler(MissingHandler),
    /// The blueprint has agent nodes and the model provider cannot be built (a
    /// missing API key, an unreadable script): said before any sandbox is made.
    Provider(String),
}

impl fmt::Display for RunProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunProblem::Param(problem) => problem.fmt(f),
            RunProblem::MissingHandler(missing) => missing.fmt(f),
            RunProblem::Provider(message) => {
                write!(
                    f,
                    "the blueprint's agent nodes need a model provider: {message}"
                )
            }
        }
    }
}

/// Why a run could not start: every problem found, params first, then nodes without
/// a handler. Nothing ran and no event was emitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", join(.problems))]
pub struct RunError {
    /// The blueprint's name.
    pub blueprint: String,
    /// The problems (never empty).
    pub problems: Vec<RunProblem>,
}

impl RunError {
    /// The nodes without a handler.
    pub fn missing_handlers(&self) -> impl Iterator<Item = &MissingHandler> {
        self.problems.iter().filter_map(|p| match p {
            RunProblem::MissingHandler(missing) => Some(missing),
            RunProblem::Param(_) | RunProblem::Provider(_) => None,
        })
    }

    /// The param problems.
    pub fn param_problems(&self) -> impl Iterator<Item = &ParamProblem> {
        self.problems.iter().filter_map(|p| match p {
            RunProblem::Param(problem) => Some(problem),
            RunProblem::MissingHandler(_) | RunProblem::Provider(_) => None,
        })
    }
}

/// When `blueprint` has `agent` or `agent_sandbox` nodes, checks that the model
/// provider can be built from `runtime` (the key is set, the script readable). Makes no
/// request. Callers (the CLI, the server) call it before [`Executor::run`], so that a
/// missing key refuses the run before any node runs or any sandbox is made.
///
/// # Errors
/// [`RunProblem::Provider`] with the provider's message.
pub fn check_provider(blueprint: &Blueprint, runtime: &RuntimeSource) -> Result<(), RunProblem> {
    let uses_model = blueprint
        .nodes
        .iter()
        .any(|n| matches!(n.node_type(), NodeType::Agent | NodeType::AgentSandbox));
    match runtime {
        RuntimeSource::Config { config, env } if uses_model => {
            boitata_core::runtime::Runtime::from_config(config.clone(), env.as_ref())
                .map(|_| ())
                .map_err(|e| RunProblem::Provider(e.to_string()))
        }
        _ => Ok(()),
    }
}

fn join(items: &[RunProblem]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Runs blueprints with a set of node handlers and hooks.
#[derive(Clone)]
pub struct Executor {
    handlers: NodeHandlers,
    hooks: Vec<Arc<dyn RunHooks>>,
    options: ExecutorOptions,
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("handlers", &self.handlers)
            .field("hooks", &self.hooks.len())
            .field("options", &self.options)
            .finish()
    }
}

impl Executor {
    /// An executor using `handlers` (start from [`NodeHandlers::host`]).
    pub fn new(handlers: NodeHandlers) -> Self {
        Executor {
            handlers,
            hooks: Vec::new(),
            options: ExecutorOptions::default(),
        }
    }

    /// Adds a hook called at the start and the end of every run.
    pub fn with_hook(mut self, hook: Arc<dyn RunHooks>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Replaces the tunables.
    pub fn with_options(mut self, options: ExecutorOptions) -> Self {
        self.options = options;
        self
    }

    /// The handlers.
    pub fn handlers(&self) -> &NodeHandlers {
        &self.handlers
    }

    /// Checks that every node of `blueprint` has a handler.
    ///
    /// # Errors
    /// [`RunError`] naming each node that has none.
    pub fn check(&self, blueprint: &Blueprint) -> Result<(), RunError> {
        let problems = self.missing_handlers(blueprint);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(RunError {
                blueprint: blueprint.name.clone(),
                problems,
            })
        }
    }

    fn missing_handlers(&self, blueprint: &Blueprint) -> Vec<RunProblem> {
        blueprint
            .nodes
            .iter()
            .filter(|n| self.handlers.get(n.handler_kind()).is_none())
            .map(|n| {
                RunProblem::MissingHandler(MissingHandler {
                    node: n.id.clone(),
                    node_type: n.node_type(),
                    kind: n.handler_kind(),
                })
            })
            .collect()
    }

    /// Checks everything a run of `blueprint` with `params` needs before it starts,
    /// and reports every problem together: params left unset or not declared, nodes
    /// without a handler. Returns the param values, defaults applied.
    ///
    /// # Errors
    /// [`RunError`] with every problem found.
    pub fn check_run(
        &self,
        blueprint: &Blueprint,
        params: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, RunError> {
        let mut problems: Vec<RunProblem> = Vec::new();
        let values = match params::resolve(blueprint, params) {
            Ok(values) => values,
            Err(e) => {
                problems.extend(e.problems.into_iter().map(RunProblem::Param));
                BTreeMap::new()
            }
        };
        problems.extend(self.missing_handlers(blueprint));
        if problems.is_empty() {
            Ok(values)
        } else {
            Err(RunError {
                blueprint: blueprint.name.clone(),
                problems,
            })
        }
    }

    /// Runs `blueprint` to its end.
    ///
    /// Checks handlers and params first ([`Executor::check_run`]): if anything is
    /// wrong nothing runs and no event is emitted. Otherwise emits `run_started`,
    /// walks the graph, runs every cleanup and hook, emits `run_finished`, and reports
    /// how the run ended (a failed or cancelled run is an `Ok` report with that
    /// status).
    ///
    /// Do not drop the returned future before it completes: cancel with
    /// `request.cancel` instead, so the running node stops and cleanup runs. (If it is
    /// dropped anyway, registered cleanups are still spawned on the current runtime.)
    ///
    /// # Errors
    /// [`RunError`] when the run cannot start.
    pub async fn run(
        &self,
        blueprint: &Blueprint,
        request: RunRequest,
    ) -> Result<RunReport, RunError> {
        let params = self.check_run(blueprint, &request.params)?;
        let RunRequest {
            task,
            workspace,
            runtime,
            emitter,
            cancel,
            ..
        } = request;
        let uses_model = blueprint
            .nodes
            .iter()
            .any(|n| matches!(n.node_type(), NodeType::Agent | NodeType::AgentSandbox));
        let (provider, model) = if uses_model {
            let config = runtime.config();
            (
                Some(config.provider.kind.as_str().to_owned()),
                Some(config.provider.model_or_default()),
            )
        } else {
            (None, None)
        };
        let budget = BudgetMeter::new(blueprint.budget.unwrap_or_else(|| runtime.config().budget));
        let scope = Arc::new(RunScope {
            run_id: emitter.run_id().to_owned(),
            blueprint: blueprint.name.clone(),
            task,
            workspace,
            emitter,
            runtime_source: runtime,
            runtime: Mutex::new(None),
            teardown: Teardown::default(),
            budget,
        });
        let guard = TeardownGuard(scope.teardown.clone());

        let mut walk = Walk {
            executor: self,
            blueprint,
            scope: scope.clone(),
            params,
            cancel,
            outputs: HashMap::new(),
            visits: HashMap::new(),
            steps: Vec::new(),
        };
        let started = scope.emitter.emit(
            None,
            EventPayload::RunStarted {
                task: scope.task.clone(),
                blueprint: Some(blueprint.name.clone()),
                workspace: Some(scope.workspace.display().to_string()),
                provider,
                model,
            },
        );
        let (status, error) = match started {
            Ok(_) => {
                for hook in &self.hooks {
                    let call = AssertUnwindSafe(hook.run_starting(&scope.run_id, &scope.emitter));
                    if call.catch_unwind().await.is_err() {
                        tracing::error!("a run_starting hook panicked");
                    }
                }
                walk.walk().await
            }
            Err(e) => (RunStatus::Failed, Some(e.to_string())),
        };

        self.finish(&scope, status).await;
        drop(guard);
        scope.emitter.emit_or_log(
            None,
            EventPayload::RunFinished {
                status,
                error: error.clone(),
            },
        );
        let last_output = walk
            .steps
            .last()
            .and_then(|step| walk.outputs.get(&step.node).cloned());
        Ok(RunReport {
            status,
            error,
            steps: walk.steps,
            outputs: walk.outputs.into_iter().collect(),
            last_output,
        })
    }

    /// Runs the registered cleanups, then the hooks, each bounded and panic-isolated.
    async fn finish(&self, scope: &Arc<RunScope>, status: RunStatus) {
        for (label, cleanup) in scope.teardown.take() {
            let task = tokio::spawn(cleanup);
            match tokio::time::timeout(self.options.cleanup_timeout, task).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!("cleanup {label:?} failed: {e}"),
                Err(_) => tracing::error!(
                    "cleanup {label:?} did not finish within {:?}",
                    self.options.cleanup_timeout
                ),
            }
        }
        let ending = RunEnding {
            run_id: &scope.run_id,
            blueprint: &scope.blueprint,
            status,
            emitter: &scope.emitter,
        };
        for hook in &self.hooks {
            let call = AssertUnwindSafe(hook.run_ending(&ending)).catch_unwind();
            match tokio::time::timeout(self.options.cleanup_timeout, call).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => tracing::error!("a run_ending hook panicked"),
                Err(_) => tracing::error!(
                    "a run_ending hook did not finish within {:?}",
                    self.options.cleanup_timeout
                ),
            }
        }
    }
}

/// Spawns leftover cleanups if the run future is dropped before it finishes.
struct TeardownGuard(Teardown);

impl Drop for TeardownGuard {
    fn drop(&mut self) {
        let pending = self.0.take();
        if pending.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                for (_, cleanup) in pending {
                    handle.spawn(cleanup);
                }
            }
            Err(_) => tracing::error!(
                "a blueprint run was dropped outside a runtime; {} cleanups did not run",
                pending.len()
            ),
        }
    }
}

/// The state of one walk.
struct Walk<'a> {
    executor: &'a Executor,
    blueprint: &'a Blueprint,
    scope: Arc<RunScope>,
    params: BTreeMap<String, String>,
    cancel: CancellationToken,
    outputs: HashMap<String, String>,
    visits: HashMap<String, u32>,
    steps: Vec<Step>,
}

/// How one node ended, as the walk sees it.
enum NodeEnd {
    /// With an outcome; the second field says it timed out (which is a failure).
    Outcome(NodeOutcome, Option<String>),
    /// With an error: the run fails.
    Error(String),
    /// The run was cancelled while it ran.
    Cancelled,
}

impl Walk<'_> {
    /// Walks from the entry; returns the run's status and error.
    async fn walk(&mut self) -> (RunStatus, Option<String>) {
        let blueprint = self.blueprint;
        let mut current = blueprint.entry.clone();
        let (last_outcome, last_exit_code, last_timeout, last_reason) = loop {
            if self.cancel.is_cancelled() {
                return (RunStatus::Cancelled, Some("cancelled".to_owned()));
            }
            let Some(node) = blueprint.node(&current) else {
                // Validation rules this out; fail rather than panic.
                return (
                    RunStatus::Failed,
                    Some(format!("edge to {current:?}: no such node")),
                );
            };
            if self.steps.len() >= blueprint.max_steps as usize {
                return (
                    RunStatus::Failed,
                    Some(format!(
                        "blueprint {:?} reached max_steps ({}) before node {:?} could run again: raise max_steps or end the loop sooner",
                        blueprint.name, blueprint.max_steps, node.id
                    )),
                );
            }
            let visits = self.visits.entry(node.id.clone()).or_insert(0);
            if *visits >= node.max_visits {
                return (
                    RunStatus::Failed,
                    Some(format!(
                        "node {:?} reached max_visits ({}) and the walk routed to it again: raise its max_visits or route the loop elsewhere",
                        node.id, node.max_visits
                    )),
                );
            }
            *visits += 1;
            let visit = *visits;

            let end = self.run_node(node, visit).await;
            let (outcome, exit_code, timeout, reason, fatal) = match end {
                NodeEnd::Outcome(outcome, timeout) => {
                    let o = (
                        outcome.outcome,
                        outcome.exit_code,
                        timeout,
                        outcome.error,
                        None,
                    );
                    self.outputs.insert(node.id.clone(), outcome.output);
                    o
                }
                NodeEnd::Error(error) => (
                    Outcome::Failure,
                    None,
                    None,
                    Some(error.clone()),
                    Some((RunStatus::Failed, error)),
                ),
                NodeEnd::Cancelled => (
                    Outcome::Failure,
                    None,
                    None,
                    Some("cancelled".to_owned()),
                    Some((RunStatus::Cancelled, "cancelled".to_owned())),
                ),
            };
            self.steps.push(Step {
                node: node.id.clone(),
                outcome,
                exit_code,
                error: timeout.clone().or_else(|| reason.clone()),
            });
            if let Some((status, error)) = fatal {
                return (status, Some(error));
            }
            if self.cancel.is_cancelled() {
                return (RunStatus::Cancelled, Some("cancelled".to_owned()));
            }
            let next = blueprint
                .edges_from(&node.id)
                .find(|edge| edge.when.matches(outcome, exit_code));
            match next {
                Some(edge) if edge.to != END => current = edge.to.clone(),
                _ => break (outcome, exit_code, timeout, reason),
            }
        };
        if last_outcome == Outcome::Success {
            return (RunStatus::Succeeded, None);
        }
        // A timeout names the node already; anything else says which node and why.
        let node = self.steps.last().map(|s| s.node.as_str()).unwrap_or("");
        let error = match (last_timeout, last_reason, last_exit_code) {
            (Some(timeout), _, _) => timeout,
            (None, Some(reason), _) => format!("the last node, {node:?}, failed: {reason}"),
            (None, None, Some(code)) => {
                format!("the last node, {node:?}, failed with exit code {code}")
            }
            (None, None, None) => format!("the last node, {node:?}, failed"),
        };
        (RunStatus::Failed, Some(error))
    }

    /// Runs one visit of `node`, emitting `node_started` (with what the node runs,
    /// placeholders substituted) and `node_finished`.
    async fn run_node(&self, node: &Node, visit: u32) -> NodeEnd {
        let emitter = &self.scope.emitter;
        let id = node.id.as_str();
        let scope = Scope {
            task: &self.scope.task,
            run_id: &self.scope.run_id,
            params: &self.params,
            outputs: &self.outputs,
        };
        let rendered = node.map_templates(|_, text| template::render(text, &node.id, &scope));
        if let Err(e) = emitter.emit(
            Some(id),
            EventPayload::NodeStarted {
                node_type: node.node_type().as_str().to_owned(),
                detail: rendered.as_ref().ok().map(started_detail),
            },
        ) {
            return NodeEnd::Error(e.to_string());
        }
        let end = match rendered {
            Ok(rendered) => self.execute(node, rendered, visit).await,
            Err(e) => NodeEnd::Error(e.to_string()),
        };
        let payload = match &end {
            NodeEnd::Outcome(outcome, timeout) => EventPayload::NodeFinished {
                outcome: outcome.outcome,
                exit_code: outcome.exit_code,
                output_preview: truncate_with_marker(&outcome.output, OUTPUT_PREVIEW_BYTES),
                error: timeout.clone().or_else(|| outcome.error.clone()),
            },
            NodeEnd::Error(error) => EventPayload::NodeFinished {
                outcome: Outcome::Failure,
                exit_code: None,
                output_preview: String::new(),
                error: Some(error.clone()),
            },
            NodeEnd::Cancelled => EventPayload::NodeFinished {
                outcome: Outcome::Failure,
                exit_code: None,
                output_preview: String::new(),
                error: Some("cancelled".to_owned()),
            },
        };
        if let Err(e) = emitter.emit(Some(id), payload) {
            return match end {
                NodeEnd::Cancelled => NodeEnd::Cancelled,
                _ => NodeEnd::Error(e.to_string()),
            };
        }
        end
    }

    /// Runs `rendered` (`node` with its placeholders substituted) in its own task,
    /// under the node's timeout and the run's token.
    async fn execute(&self, node: &Node, rendered: Node, visit: u32) -> NodeEnd {
        let Some(handler) = self.executor.handlers.get(node.handler_kind()).cloned() else {
            return NodeEnd::Error(format!(
                "node {:?}: no handler for {}",
                node.id,
                node.handler_kind()
            ));
        };
        let node_cancel = self.cancel.child_token();
        let ctx = NodeContext {
            run: self.scope.clone(),
            node_id: node.id.clone(),
            visit,
            cancel: node_cancel.clone(),
        };
        let mut task = tokio::spawn(async move { handler.run(&rendered, &ctx).await });

        let timeout = async {
            match node.timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        enum Stop {
            Cancelled,
            TimedOut(Duration),
        }
        let stop = tokio::select! {
            joined = &mut task => return self.joined(node, joined),
            _ = self.cancel.cancelled() => Stop::Cancelled,
            _ = timeout => Stop::TimedOut(node.timeout.unwrap_or_default()),
        };
        node_cancel.cancel();
        let joined = match tokio::time::timeout(self.executor.options.cancel_grace, &mut task).await
        {
            Ok(joined) => Some(joined),
            Err(_) => {
                tracing::warn!(
                    "node {:?} did not stop within {:?} of being cancelled; aborting it",
                    node.id,
                    self.executor.options.cancel_grace
                );
                task.abort();
                None
            }
        };
        match stop {
            Stop::Cancelled => NodeEnd::Cancelled,
            Stop::TimedOut(limit) => {
                let error = format!(
                    "node {:?} timed out after {}",
                    node.id,
                    humantime::format_duration(limit)
                );
                let mut outcome = match joined {
                    Some(Ok(Ok(outcome))) => outcome,
                    _ => NodeOutcome::failure(""),
                };
                outcome.outcome = Outcome::Failure;
                NodeEnd::Outcome(outcome, Some(error))
            }
        }
    }

    fn joined(
        &self,
        node: &Node,
        joined: Result<Result<NodeOutcome, NodeError>, tokio::task::JoinError>,
    ) -> NodeEnd {
        match joined {
            Ok(Ok(outcome)) => NodeEnd::Outcome(outcome, None),
            Ok(Err(NodeError::Cancelled)) if self.cancel.is_cancelled() => NodeEnd::Cancelled,
            Ok(Err(e)) => NodeEnd::Error(naming_the_node(&node.id, e.to_string())),
            Err(e) if e.is_panic() => {
                let payload = e.into_panic();
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned());
                NodeEnd::Error(format!("node {:?} panicked: {message}", node.id))
            }
            Err(e) => NodeEnd::Error(format!("node {:?} was aborted: {e}", node.id)),
        }
    }
}

/// `message` prefixed `node "ID": `, once: handlers' errors often name their node
/// already (`node "box": network "host" is not supported: ...`).
fn naming_the_node(id: &str, message: String) -> String {
    let prefix = format!("node {id:?}");
    match message.strip_prefix(&prefix) {
        Some(rest) if rest.starts_with(':') || rest.starts_with(' ') => message,
        _ => format!("{prefix}: {message}"),
    }
}
