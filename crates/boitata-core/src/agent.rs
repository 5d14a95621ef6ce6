//! The agent loop: ask the model, run the tools it calls, feed back the results,
//! until it ends its turn, runs out of turns, or is cancelled.
//!
//! Every step is an [`Event`](crate::Event) on the run's [`Emitter`]: `agent_message`
//! for the model's text, `tool_call` / `tool_result` for each call (in the order the
//! model made them), `usage` per model request.
//!
//! Every tool result passes through the run's redactor (the emitter's,
//! [`Emitter::redactor`]) before it enters the conversation: the model never sees a
//! secret the run's events would hide.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::budget::{BudgetExceeded, BudgetMeter};
use crate::event::{Emitter, EventPayload, SinkError};
use boitata_provider::{Message, ModelRequest, Provider, ProviderError, Usage};
use boitata_tools::tool::{ToolContext, ToolLimits, Toolbox};
use boitata_tools::workspace::Workspace;

/// The built-in system prompt.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are Boitata, a careful software engineering agent. \
You work in a repository (the workspace) through tools: read and search files before you change them, \
make small exact edits, run the project's tests with execute_command to check your work, and commit \
when asked. Paths are relative to the workspace root; you cannot reach outside it. \
When the task is done, reply with a short summary of what you changed and how you checked it, \
and call no more tools.";

/// How the agent behaves.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// The most model requests in one [`Agent::run`].
    pub max_turns: u32,
    /// The system prompt.
    pub system_prompt: String,
    /// Tool limits.
    pub limits: ToolLimits,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            max_turns: 30,
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
            limits: ToolLimits::default(),
        }
    }
}

/// Why [`Agent::run`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentStop {
    /// The model ended its turn (replied without calling tools).
    EndTurn,
    /// It used `max_turns` model requests without ending its turn.
    MaxTurns,
    /// The cancellation token fired.
    Cancelled,
}

/// What [`Agent::run`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutcome {
    /// The model's last text (empty if it never said anything).
    pub final_message: String,
    /// Why it stopped.
    pub stop: AgentStop,
    /// Model requests made.
    pub turns: u32,
    /// Tokens used, summed over requests.
    pub usage: Usage,
}

/// What can end [`Agent::run`] with an error.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The model API failed (after its own retries).
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// An event could not be recorded.
    #[error(transparent)]
    Event(#[from] SinkError),
    /// The run's budget is spent (`budget exceeded: tokens 120034 > 120000`); the
    /// `budget_exceeded` event was emitted.
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
}

/// An agent: a provider, tools and settings. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    provider: Arc<dyn Provider>,
    toolbox: Toolbox,
    settings: AgentSettings,
    command_env: BTreeMap<String, String>,
    budget: BudgetMeter,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.provider.name())
            .field("model", &self.provider.model())
            .field("toolbox", &self.toolbox)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent. `command_env` is the exact environment its commands get.
    pub fn new(
        provider: Arc<dyn Provider>,
        toolbox: Toolbox,
        settings: AgentSettings,
        command_env: BTreeMap<String, String>,
    ) -> Self {
        Agent {
            provider,
            toolbox,
            settings,
            command_env,
            budget: BudgetMeter::default(),
        }
    }

    /// This agent charging its model requests to `budget` (shared with whatever else
    /// the run charges): a request is made only if the meter admits it, and each
    /// answer's usage is charged to it.
    pub fn with_budget(mut self, budget: BudgetMeter) -> Self {
        self.budget = budget;
        self
    }

    /// The meter its model requests are charged to.
    pub fn budget(&self) -> &BudgetMeter {
        &self.budget
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The settings.
    pub fn settings(&self) -> &AgentSettings {
        &self.settings
    }

    /// This agent with `max_turns` replaced (a blueprint node's own limit).
    pub fn with_max_turns(mut self, max_turns: u32) -> Self {
        self.settings.max_turns = max_turns;
        self
    }

    /// Works on `task` in `workspace` until the model ends its turn, `max_turns` is
    /// reached or `cancel` fires. Events go to `emitter`, tagged with `node`.
    ///
    /// A tool that fails or refuses a path is reported to the model as an error result;
    /// the loop goes on. Cancellation interrupts a model request or a tool call at once.
    ///
    /// # Errors
    /// [`AgentError::Provider`] when the model API fails; [`AgentError::Event`] when an
    /// event cannot be recorded; [`AgentError::Budget`] when the budget is spent
    /// (before a request, or by the usage an answer reports: the answer's text and
    /// tool calls are then not acted on), after its `budget_exceeded` event.
    pub async fn run(
        &self,
        task: &str,
        workspace: &Workspace,
        emitter: &Emitter,
        node: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<AgentOutcome, AgentError> {
        let ctx = ToolContext {
            workspace: workspace.clone(),
            cancel: cancel.clone(),
            command_env: self.command_env.clone(),
            limits: self.settings.limits.clone(),
        };
        let mut request = ModelRequest {
            system: self.settings.system_prompt.clone(),
            messages: vec![Message::User {
                content: task.to_owned(),
            }],
            tools: self.toolbox.specs(),
            max_output_tokens: None,
        };
        let mut outcome = AgentOutcome {
            final_message: String::new(),
            stop: AgentStop::MaxTurns,
            turns: 0,
            usage: Usage::default(),
        };
        // Each note once per run, however many responses repeat it.
        let mut notes_sent: Vec<String> = Vec::new();
        while outcome.turns < self.settings.max_turns {
            if cancel.is_cancelled() {
                outcome.stop = AgentStop::Cancelled;
                return Ok(outcome);
            }
            if let Err(e) = self.budget.admit() {
                self.budget.report(emitter, node)?;
                return Err(e.into());
            }
            outcome.turns += 1;
            let mut ignore_deltas = |_: &str| {};
            let response = tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    outcome.stop = AgentStop::Cancelled;
                    return Ok(outcome);
                }
                response = self.provider.complete(&request, &mut ignore_deltas) => response?,
            };
            for note in &response.notes {
                if !notes_sent.contains(note) {
                    emitter.emit(
                        node,
                        EventPayload::Note {
                            message: note.clone(),
                        },
                    )?;
                    notes_sent.push(note.clone());
                }
            }
            if let Some(usage) = response.usage {
                outcome.usage.input_tokens += usage.input_tokens;
                outcome.usage.output_tokens += usage.output_tokens;
                emitter.emit(
                    node,
                    EventPayload::Usage {
                        input_tokens: usage.input_tokens,
                        output_tokens: usage.output_tokens,
                    },
                )?;
                if let Err(e) = self.budget.charge(usage.input_tokens, usage.output_tokens) {
                    self.budget.report(emitter, node)?;
                    return Err(e.into());
                }
            }
            if !response.text.trim().is_empty() {
                outcome.final_message = response.text.clone();
                emitter.emit(
                    node,
                    EventPayload::AgentMessage {
                        text: response.text.clone(),
                    },
                )?;
            }
            request.messages.push(Message::Assistant {
                content: response.text.clone(),
                tool_calls: response.tool_calls.clone(),
            });
            if response.tool_calls.is_empty() {
                outcome.stop = AgentStop::EndTurn;
                return Ok(outcome);
            }
            for call in &response.tool_calls {
                emitter.emit(
                    node,
                    EventPayload::ToolCall {
                        call_id: call.id.clone(),
                        tool: call.name.clone(),
                        arguments: call.arguments.clone(),
                    },
                )?;
                let result = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => None,
                    result = self.toolbox.call(&ctx, &call.name, call.arguments.clone()) => Some(result),
                };
                let (ok, output) = match result {
                    Some(Ok(output)) => (true, output),
                    Some(Err(e)) => (false, format!("error: {e}")),
                    None => (false, "error: cancelled".to_owned()),
                };
                // The run's redactor, before the result reaches the model or an event:
                // a command may print a key it never named (`/proc/$PPID/environ` as
                // root, a token in `.git/config`).
                let output = emitter.redactor().redact(&output);
                emitter.emit(
                    node,
                    EventPayload::ToolResult {
                        call_id: call.id.clone(),
                        tool: call.name.clone(),
                        ok,
                        output: output.clone(),
                    },
                )?;
                request.messages.push(Message::Tool {
                    call_id: call.id.clone(),
                    content: output,
                    is_error: !ok,
                });
                if cancel.is_cancelled() {
                    outcome.stop = AgentStop::Cancelled;
                    return Ok(outcome);
                }
            }
        }
        outcome.stop = AgentStop::MaxTurns;
        Ok(outcome)
    }
}
