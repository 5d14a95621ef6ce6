//! `agent_sandbox`: Boitata's agent running *inside* a sandbox of the run, driven over
//! ACP (TCP). Output: the agent's final message; outcome: success iff its turn ended
//! with `end_turn`.
//!
//! Each visit of the node:
//!
//! 1. makes a fresh **secret** (32 random bytes, hex) that the agent will demand of its
//!    client, and adds it to the run's redactor so that no event can show it;
//! 2. for the `openai` and `anthropic` providers, gives the agent access to the model
//!    through the orchestrator's [model gateway](crate::gateway): the run's grant
//!    (made by its first such node, revoked when the run ends) holds the real key; the
//!    agent gets the gateway's URL on the sandbox network's gateway address and the
//!    run's gateway token, never the key;
//! 3. makes a private directory in the sandbox and uploads the agent's settings (the
//!    run's config without any secret, the gateway's URL as its `base_url`, no budget)
//!    and, for the `scripted` provider, the script file;
//! 4. starts `boitata-agent --addr 0.0.0.0:PORT --workspace DIR --config FILE` detached,
//!    with the secret, the provider settings and the gateway token in the environment
//!    of that one process: never in the image, the sandbox's own environment, its
//!    labels, a file or an event. Its stdout and stderr go to a log file in the
//!    sandbox;
//! 5. waits (at most [`DEFAULT_READY_TIMEOUT`]) until the agent answers `initialize` on
//!    the sandbox's address on the run network (or the port it publishes on host
//!    loopback on `bridge`), watching the process: when it
//!    exits first, or never answers, the node fails with the tail of its log;
//! 6. prompts it once ([`run_prompt_at`]), re-emitting each of its events (messages,
//!    tool calls, tool results) in order as events of this run and node; its `usage`
//!    events are dropped when the gateway serves the run (the gateway emits the run's
//!    own from the provider's answers), and relayed and charged to the run's budget
//!    when not (`scripted`). Cancelling the run, the node's timeout, or the run's
//!    budget running out sends `session/cancel`; a spent budget fails the node with
//!    `budget exceeded: …`;
//! 7. stops the agent (SIGTERM, then SIGKILL), so that a later visit can start afresh.
//!
//! DIR is the sandbox's working directory (the `provision` node's `workdir`, default
//! `/workspace`), where `checkout` puts the code by default.
//!
//! The model server itself is only ever called from the host, by the gateway: one on
//! the host's loopback (`http://127.0.0.1:11434/v1`) works as it is.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use boitata_acp::{run_prompt_at, wait_ready, AcpError, Prompt, PromptOutcome, StopReason};
use boitata_blueprint::{Node, NodeContext, NodeError, NodeHandler, NodeOutcome, NodeSpec};
use boitata_core::config::{Config, ProviderKind, ServerConfig};
use boitata_core::event::SinkError;
use boitata_core::{Event, EventPayload};

use boitata_core::budget::{Budget, BudgetMeter};
use tokio_util::sync::CancellationToken;

use super::agent_process::{AgentProcess, AgentStatus, PrepareError, AGENT_PROGRAM};
use super::model_access::ModelAccess;
use super::{SandboxNodes, DEFAULT_AGENT_PORT};
use crate::sandbox::{SandboxError, SandboxId};

/// How long the agent gets to answer `initialize` after it is started.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The variable the agent reads its per-run secret from.
pub const SECRET_VARIABLE: &str = "BOITATA_AGENT_SECRET";

/// How long the turn gets to end after `session/cancel`.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// How often the agent process is checked while waiting for it.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// The `agent_sandbox` handler.
#[derive(Debug, Clone)]
pub struct AgentSandbox {
    nodes: SandboxNodes,
    ready_timeout: Duration,
}

impl AgentSandbox {
    /// A handler driving agents in the sandboxes of `nodes`, waiting up to
    /// [`DEFAULT_READY_TIMEOUT`] for each to answer.
    pub fn new(nodes: SandboxNodes) -> Self {
        AgentSandbox {
            nodes,
            ready_timeout: DEFAULT_READY_TIMEOUT,
        }
    }

    /// Waits up to `timeout` for the agent to answer instead.
    pub fn with_ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }
}

/// Why an `agent_sandbox` node could not run its agent to the end of a turn.
#[derive(Debug, thiserror::Error)]
pub enum AgentSandboxError {
    /// The sandbox's image has no `boitata-agent`.
    #[error(
        "node {node:?}: sandbox {sandbox} has no {AGENT_PROGRAM} on its PATH: provision it \
         from an image with the agent, e.g. boitata-agent-rust:latest \
         (scripts/build-agent-image.sh builds it)"
    )]
    MissingAgent {
        /// The node.
        node: String,
        /// The sandbox (short id).
        sandbox: String,
    },
    /// The agent's port cannot be reached (a sandbox without network, another port).
    #[error(
        "node {node:?}: port {port} of sandbox {sandbox} cannot be reached: agent_sandbox \
         needs a sandbox on the run network (the default) or bridge, where port \
         {DEFAULT_AGENT_PORT} is open to the orchestrator, and its port left out or set to \
         {DEFAULT_AGENT_PORT}"
    )]
    PortNotPublished {
        /// The node.
        node: String,
        /// The sandbox (short id).
        sandbox: String,
        /// The port asked for.
        port: u16,
    },
    /// The provider needs an API key and the run's environment has none.
    #[error(
        "node {node:?}: provider {provider} needs an API key: set {variable} in the \
         environment boitata runs in"
    )]
    MissingApiKey {
        /// The node.
        node: String,
        /// The provider.
        provider: &'static str,
        /// The variable to set.
        variable: &'static str,
    },
    /// The `scripted` provider has no script, or it cannot be read.
    #[error("node {node:?}: {message}")]
    Script {
        /// The node.
        node: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// No secret could be made.
    #[error("node {node:?}: cannot make a secret for the agent: {message}")]
    Secret {
        /// The node.
        node: String,
        /// The system's error.
        message: String,
    },
    /// The backend failed at a step of the launch.
    #[error("node {node:?}: {step}: {source}")]
    Sandbox {
        /// The node.
        node: String,
        /// What was being done.
        step: &'static str,
        /// The backend's error.
        #[source]
        source: SandboxError,
    },
    /// The agent process exited before it answered.
    #[error(
        "node {node:?}: {AGENT_PROGRAM} exited in sandbox {sandbox} before it answered on \
         port {port}; its log ends with:\n{log_tail}"
    )]
    ExitedEarly {
        /// The node.
        node: String,
        /// The sandbox (short id).
        sandbox: String,
        /// The agent's port inside the sandbox.
        port: u16,
        /// The end of the agent's stdout and stderr.
        log_tail: String,
    },
    /// The agent did not answer in time.
    #[error(
        "node {node:?}: {AGENT_PROGRAM} in sandbox {sandbox} did not answer on port {port} \
         within {waited:?} ({last_error}); its log ends with:\n{log_tail}"
    )]
    NotReady {
        /// The node.
        node: String,
        /// The sandbox (short id).
        sandbox: String,
        /// The agent's port inside the sandbox.
        port: u16,
        /// How long it was given.
        waited: Duration,
        /// The last connection failure.
        last_error: String,
        /// The end of the agent's stdout and stderr.
        log_tail: String,
    },
    /// The connection to the agent ended in the middle of the turn.
    #[error(
        "node {node:?}: {AGENT_PROGRAM} in sandbox {sandbox} closed the connection during \
         the turn ({process}); its log ends with:\n{log_tail}"
    )]
    DiedDuringTurn {
        /// The node.
        node: String,
        /// The sandbox (short id).
        sandbox: String,
        /// What became of the process (`the process is gone`, …).
        process: &'static str,
        /// The end of the agent's stdout and stderr.
        log_tail: String,
    },
    /// The agent answered with an error, or the protocol failed.
    #[error("node {node:?}: {source}; the agent's log ends with:\n{log_tail}")]
    Acp {
        /// The node.
        node: String,
        /// The client's error.
        #[source]
        source: AcpError,
        /// The end of the agent's stdout and stderr.
        log_tail: String,
    },
}

#[async_trait]
impl NodeHandler for AgentSandbox {
    async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
        let NodeSpec::AgentSandbox(fields) = &node.spec else {
            return Err(NodeError::Invalid(format!(
                "node {:?}: the agent_sandbox handler cannot run a {} node",
                node.id,
                node.node_type()
            )));
        };
        let sandbox = self.nodes.sandbox_of_run(ctx, &fields.container)?;
        let port = fields.port.unwrap_or(DEFAULT_AGENT_PORT);
        let failed = |e: AgentSandboxError| NodeError::other(e);
        let sandbox_failed = |step: &'static str, source: SandboxError| {
            failed(AgentSandboxError::Sandbox {
                node: node.id.clone(),
                step,
                source,
            })
        };

        // The host side first: nothing is started if the settings are incomplete.
        let config = ctx.config().clone();
        let api_key = api_key(&config, ctx, &node.id).map_err(failed)?;
        let script = read_script(&config, &node.id).await.map_err(failed)?;
        let secret = new_secret().map_err(|message| {
            failed(AgentSandboxError::Secret {
                node: node.id.clone(),
                message,
            })
        })?;
        // From here on, no event of the run can show it.
        ctx.emitter().add_secrets([secret.clone()]);

        let backend = self.nodes.backend().clone();
        let addr = cancellable(ctx, backend.endpoint(&sandbox, port))
            .await?
            .map_err(|source| match source {
                SandboxError::PortNotPublished { .. } => {
                    failed(AgentSandboxError::PortNotPublished {
                        node: node.id.clone(),
                        sandbox: sandbox.short().to_owned(),
                        port,
                    })
                }
                other => sandbox_failed("cannot find the agent's address", other),
            })?;

        // The agent reaches the model through the run's gateway grant, never with the key.
        let access = cancellable(
            ctx,
            self.nodes
                .model_access(ctx, &sandbox, &config, api_key.map(|(_, key)| key)),
        )
        .await??;

        let agent = match cancellable(ctx, AgentProcess::prepare(backend, sandbox.clone())).await? {
            Ok(agent) => agent,
            Err(PrepareError::MissingAgent) => {
                return Err(failed(AgentSandboxError::MissingAgent {
                    node: node.id.clone(),
                    sandbox: sandbox.short().to_owned(),
                }))
            }
            Err(PrepareError::Sandbox(e)) => {
                return Err(sandbox_failed("cannot prepare the agent's directory", e))
            }
            Err(PrepareError::Failed(code, message)) => {
                return Err(NodeError::Invalid(format!(
                    "node {:?}: cannot prepare the agent's directory in sandbox {} \
                     (exit {code}): {message}",
                    node.id,
                    sandbox.short()
                )))
            }
        };

        let launch = Launch {
            node: &node.id,
            sandbox: &sandbox,
            port,
            addr,
            agent: &agent,
        };
        let result = launch
            .run(
                ctx,
                LaunchSettings {
                    config,
                    access,
                    script,
                    secret,
                    prompt: fields.prompt.clone(),
                    max_turns: fields.max_turns,
                    ready_timeout: self.ready_timeout,
                },
            )
            .await;
        // Whatever happened, this visit's agent goes: a later visit starts its own.
        agent.stop().await;
        result
    }
}

/// What one launch needs besides where it happens.
struct LaunchSettings {
    config: Config,
    access: Option<ModelAccess>,
    script: Option<Vec<u8>>,
    secret: String,
    prompt: String,
    max_turns: Option<u32>,
    ready_timeout: Duration,
}

/// One visit's agent: where it runs and how it is reached.
struct Launch<'a> {
    node: &'a str,
    sandbox: &'a SandboxId,
    port: u16,
    addr: SocketAddr,
    agent: &'a AgentProcess,
}

impl Launch<'_> {
    async fn run(
        &self,
        ctx: &NodeContext,
        settings: LaunchSettings,
    ) -> Result<NodeOutcome, NodeError> {
        let LaunchSettings {
            config,
            access,
            script,
            secret,
            prompt,
            max_turns,
            ready_timeout,
        } = settings;
        let failed = |e: AgentSandboxError| NodeError::other(e);

        // Files first: the script (for `scripted`), then the settings.
        let mut agent_config = sandbox_config(&config, access.as_ref());
        if let Some(script) = &script {
            let path = cancellable(ctx, self.agent.upload("script.json", script))
                .await?
                .map_err(|e| {
                    failed(self.sandbox_error("cannot upload the provider's script", e))
                })?;
            agent_config.provider.script = Some(PathBuf::from(path));
        }
        let settings_file = toml::to_string(&agent_config).map_err(|e| {
            NodeError::Invalid(format!(
                "node {:?}: cannot write the agent's settings: {e}",
                self.node
            ))
        })?;
        let config_path = cancellable(
            ctx,
            self.agent.upload("config.toml", settings_file.as_bytes()),
        )
        .await?
        .map_err(|e| failed(self.sandbox_error("cannot upload the agent's settings", e)))?;

        let env = launch_env(&agent_config, access.as_ref(), &secret);
        let argv = vec![
            AGENT_PROGRAM.to_owned(),
            "--addr".to_owned(),
            format!("0.0.0.0:{}", self.port),
            "--workspace".to_owned(),
            self.agent.workspace().to_owned(),
            "--config".to_owned(),
            config_path,
        ];
        cancellable(ctx, self.agent.launch(argv, env))
            .await?
            .map_err(|e| failed(self.sandbox_error("cannot start the agent", e)))?;
        tracing::debug!(
            node = self.node,
            sandbox = %self.sandbox.short(),
            addr = %self.addr,
            "agent started; waiting for it to answer"
        );

        // Ready: it answers `initialize`, unless it dies or time runs out first.
        let ready = tokio::select! {
            ready = wait_ready(self.addr, ready_timeout) => ready,
            () = self.agent.exited(WATCH_INTERVAL) => {
                return Err(failed(AgentSandboxError::ExitedEarly {
                    node: self.node.to_owned(),
                    sandbox: self.sandbox.short().to_owned(),
                    port: self.port,
                    log_tail: self.agent.log_tail().await,
                }));
            }
            () = ctx.cancel().cancelled() => return Err(NodeError::Cancelled),
        };
        if let Err(e) = ready {
            let (waited, last_error) = match e {
                AcpError::NotReady {
                    waited, last_error, ..
                } => (waited, last_error),
                other => (ready_timeout, other.to_string()),
            };
            let log_tail = self.agent.log_tail().await;
            if self.agent.status().await.ok() == Some(AgentStatus::Exited) {
                return Err(failed(AgentSandboxError::ExitedEarly {
                    node: self.node.to_owned(),
                    sandbox: self.sandbox.short().to_owned(),
                    port: self.port,
                    log_tail,
                }));
            }
            return Err(failed(AgentSandboxError::NotReady {
                node: self.node.to_owned(),
                sandbox: self.sandbox.short().to_owned(),
                port: self.port,
                waited,
                last_error,
                log_tail,
            }));
        }

        // The turn, its events teed into the run in the order they arrive.
        let prompt = Prompt::new(prompt, self.agent.workspace())
            .secret(secret)
            .max_turns(max_turns.unwrap_or(config.agent.max_turns))
            .cancel_grace(CANCEL_GRACE);
        // The turn stops early when the run's budget is spent: by the wall clock, or
        // by the usage the agent reports when no gateway counts it (`scripted`).
        let turn_cancel = ctx.cancel().child_token();
        let wall = wall_timer(ctx, turn_cancel.clone());
        let mut relay = Relay::new(ctx, access.is_some(), turn_cancel.clone());
        let turn = run_prompt_at(self.addr, prompt, |event| relay.take(event), turn_cancel).await;
        wall.abort();
        if let Some(e) = relay.failure {
            return Err(NodeError::Event(e));
        }
        if let Some(exceeded) = ctx.budget().exceeded() {
            ctx.budget()
                .report(ctx.emitter(), Some(self.node))
                .map_err(NodeError::Event)?;
            return Err(NodeError::other(exceeded));
        }
        match turn {
            Ok(outcome) => Ok(node_outcome(outcome)),
            Err(AcpError::ClosedDuringTurn) | Err(AcpError::Closed { .. }) => {
                let process = match self.agent.status().await {
                    Ok(AgentStatus::Exited) => "the agent process is gone",
                    Ok(_) => "the agent process is still running",
                    Err(_) => "the sandbox cannot be asked about the agent process",
                };
                Err(failed(AgentSandboxError::DiedDuringTurn {
                    node: self.node.to_owned(),
                    sandbox: self.sandbox.short().to_owned(),
                    process,
                    log_tail: self.agent.log_tail().await,
                }))
            }
            Err(source) => Err(failed(AgentSandboxError::Acp {
                node: self.node.to_owned(),
                source,
                log_tail: self.agent.log_tail().await,
            })),
        }
    }

    fn sandbox_error(&self, step: &'static str, source: SandboxError) -> AgentSandboxError {
        AgentSandboxError::Sandbox {
            node: self.node.to_owned(),
            step,
            source,
        }
    }
}

/// Re-emits the agent's events as this run's, tagged with the node.
///
/// When the model gateway serves the run, the agent's own `usage` events are dropped:
/// the gateway emits the run's, from the provider's answers. Without a gateway
/// (`scripted`), the agent's usage is relayed and charged to the run's budget, and
/// the turn is cancelled when that spends it.
struct Relay {
    emitter: boitata_core::Emitter,
    node: String,
    gateway_counts_usage: bool,
    budget: BudgetMeter,
    turn: CancellationToken,
    /// The first event the run could not record: the node fails with it.
    failure: Option<SinkError>,
}

impl Relay {
    fn new(ctx: &NodeContext, gateway_counts_usage: bool, turn: CancellationToken) -> Self {
        Relay {
            emitter: ctx.emitter().clone(),
            node: ctx.node_id().to_owned(),
            gateway_counts_usage,
            budget: ctx.budget().clone(),
            turn,
            failure: None,
        }
    }

    fn take(&mut self, event: Event) {
        // The agent's own run bookkeeping (its per-prompt run id and seq) stays behind;
        // what it did becomes part of this run.
        let relayed = match &event.payload {
            EventPayload::AgentMessage { .. }
            | EventPayload::ToolCall { .. }
            | EventPayload::ToolResult { .. }
            | EventPayload::Note { .. }
            | EventPayload::ExecOutput { .. } => true,
            EventPayload::Usage { .. } => !self.gateway_counts_usage,
            _ => false,
        };
        if !relayed || self.failure.is_some() {
            return;
        }
        let usage = match &event.payload {
            EventPayload::Usage {
                input_tokens,
                output_tokens,
            } => Some((*input_tokens, *output_tokens)),
            _ => None,
        };
        if let Err(e) = self.emitter.emit(Some(&self.node), event.payload) {
            self.failure = Some(e);
            return;
        }
        if let Some((input, output)) = usage {
            let spent = self
                .budget
                .admit()
                .and_then(|()| self.budget.charge(input, output));
            if spent.is_err() {
                if let Err(e) = self.budget.report(&self.emitter, Some(&self.node)) {
                    self.failure = Some(e);
                }
                self.turn.cancel();
            }
        }
    }
}

/// Cancels `turn` when the run's wall budget runs out (recording it as spent).
fn wall_timer(ctx: &NodeContext, turn: CancellationToken) -> tokio::task::JoinHandle<()> {
    let budget = ctx.budget().clone();
    tokio::spawn(async move {
        let Some(deadline) = budget.wall_deadline() else {
            return;
        };
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await;
        // Just past the deadline, the wall budget is spent.
        tokio::time::sleep(Duration::from_millis(5)).await;
        if budget.check().is_err() {
            turn.cancel();
        }
    })
}

/// Success iff the turn ended with `end_turn`; the output is the final message.
fn node_outcome(outcome: PromptOutcome) -> NodeOutcome {
    let PromptOutcome {
        final_message,
        stop_reason,
        ..
    } = outcome;
    if stop_reason == StopReason::EndTurn {
        return NodeOutcome::success(final_message);
    }
    if final_message.trim().is_empty() {
        NodeOutcome::failure(format!("the agent's turn ended with {stop_reason}"))
    } else {
        NodeOutcome::failure(final_message)
    }
}

/// Awaits `work` unless the node is cancelled first.
async fn cancellable<T>(
    ctx: &NodeContext,
    work: impl std::future::Future<Output = T>,
) -> Result<T, NodeError> {
    tokio::select! {
        () = ctx.cancel().cancelled() => Err(NodeError::Cancelled),
        done = work => Ok(done),
    }
}

/// The provider's key variable and value, when it needs one.
fn api_key(
    config: &Config,
    ctx: &NodeContext,
    node: &str,
) -> Result<Option<(&'static str, String)>, AgentSandboxError> {
    let Some(variable) = config.provider.kind.api_key_variable() else {
        return Ok(None);
    };
    match config
        .provider
        .api_key
        .clone()
        .or_else(|| ctx.env_var(variable))
    {
        Some(key) => Ok(Some((variable, key))),
        None => Err(AgentSandboxError::MissingApiKey {
            node: node.to_owned(),
            provider: config.provider.kind.as_str(),
            variable,
        }),
    }
}

/// The `scripted` provider's script, read on the host.
async fn read_script(config: &Config, node: &str) -> Result<Option<Vec<u8>>, AgentSandboxError> {
    if config.provider.kind != ProviderKind::Scripted {
        return Ok(None);
    }
    let Some(path) = &config.provider.script else {
        return Err(AgentSandboxError::Script {
            node: node.to_owned(),
            message: "the scripted provider needs a script file: set BOITATA_SCRIPT, \
                      --script, or provider.script in the config"
                .to_owned(),
        });
    };
    tokio::fs::read(path)
        .await
        .map(Some)
        .map_err(|e| AgentSandboxError::Script {
            node: node.to_owned(),
            message: format!(
                "cannot read the scripted provider's script {}: {e}",
                path.display()
            ),
        })
}

/// 32 random bytes from the operating system, as 64 hex digits.
fn new_secret() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The run's settings as the agent in the sandbox gets them: no secret (the API key
/// is never serialized; the server's token and the data dir are dropped), the model
/// gateway's URL as the provider's `base_url`, and no budget (the orchestrator
/// enforces the run's). The script path is set once uploaded.
fn sandbox_config(config: &Config, access: Option<&ModelAccess>) -> Config {
    let mut agent = config.clone();
    agent.server = ServerConfig::default();
    agent.data_dir = None;
    agent.source = None;
    agent.budget = Budget::default();
    agent.provider.api_key = None;
    agent.provider.script = None;
    agent.provider.base_url = access.map(|access| access.base_url.clone());
    agent
}

/// The agent's launch environment: the provider settings, the gateway token as its
/// API key (never the provider's key), the secret.
fn launch_env(
    config: &Config,
    access: Option<&ModelAccess>,
    secret: &str,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert(SECRET_VARIABLE.to_owned(), secret.to_owned());
    env.insert(
        "BOITATA_PROVIDER".to_owned(),
        config.provider.kind.as_str().to_owned(),
    );
    env.insert(
        "BOITATA_MODEL".to_owned(),
        config.provider.model_or_default(),
    );
    if let Some(url) = &config.provider.base_url {
        env.insert("BOITATA_BASE_URL".to_owned(), url.clone());
    }
    env.insert(
        "BOITATA_STREAM".to_owned(),
        config.provider.stream.as_str().to_owned(),
    );
    if let Some(script) = &config.provider.script {
        env.insert("BOITATA_SCRIPT".to_owned(), script.display().to_string());
    }
    if let (Some(variable), Some(access)) = (config.provider.kind.api_key_variable(), access) {
        env.insert(variable.to_owned(), access.token.clone());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_fresh_hex() {
        let a = new_secret().unwrap();
        let b = new_secret().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn the_agent_settings_hold_no_secret() {
        let mut config = Config::default();
        config.provider.api_key = Some("sk-test-0123456789abcdefghij".into());
        config.server.api_token = Some("server-token-123456".into());
        config.provider.base_url = Some("http://127.0.0.1:9/v1".into());
        config.data_dir = Some("/home/me/.local/share/boitata".into());
        config.provider.stream = boitata_core::config::StreamMode::Never;
        config.budget.tokens = Some(1000);
        let access = ModelAccess {
            base_url: "http://172.17.0.1:4567/v1".into(),
            token: "bgw-0123456789abcdef".into(),
        };
        let text = toml::to_string(&sandbox_config(&config, Some(&access))).unwrap();
        assert!(!text.contains("sk-test"), "{text}");
        assert!(!text.contains("server-token"), "{text}");
        assert!(!text.contains("/home/me"), "{text}");
        assert!(!text.contains("127.0.0.1:9"), "{text}");
        assert!(
            !text.contains("bgw-"),
            "the token is in the environment only: {text}"
        );
        assert!(text.contains("http://172.17.0.1:4567/v1"), "{text}");
        let back: Config = toml::from_str(&text).unwrap();
        assert_eq!(back.agent, config.agent);
        assert_eq!(back.tools, config.tools);
        // `--stream false` reaches the agent in the sandbox.
        assert_eq!(
            back.provider.stream,
            boitata_core::config::StreamMode::Never
        );
        assert_eq!(launch_env(&config, None, "s")["BOITATA_STREAM"], "false");
        assert!(
            back.budget.is_unlimited(),
            "the orchestrator enforces the budget"
        );
    }

    #[test]
    fn the_launch_environment_carries_the_gateway_token_and_secret() {
        let mut config = Config::default();
        config.provider.kind = ProviderKind::Scripted;
        config.provider.script = Some("/tmp/boitata-agent.x/script.json".into());
        let env = launch_env(&config, None, "s3cr3t-s3cr3t");
        assert_eq!(env[SECRET_VARIABLE], "s3cr3t-s3cr3t");
        assert_eq!(env["BOITATA_PROVIDER"], "scripted");
        assert_eq!(env["BOITATA_SCRIPT"], "/tmp/boitata-agent.x/script.json");
        assert!(!env.contains_key("BOITATA_BASE_URL"));
        let access = ModelAccess {
            base_url: "http://172.17.0.1:4567/v1".into(),
            token: "bgw-0123456789abcdef".into(),
        };
        let config = sandbox_config(&Config::default(), Some(&access));
        let env = launch_env(&config, Some(&access), "s");
        assert_eq!(env["OPENAI_API_KEY"], "bgw-0123456789abcdef");
        assert_eq!(env["BOITATA_BASE_URL"], "http://172.17.0.1:4567/v1");
        assert_eq!(env["BOITATA_PROVIDER"], "openai");
    }
}
