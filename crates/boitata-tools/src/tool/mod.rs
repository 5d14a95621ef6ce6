//! The agent's tools. Each tool is one file, has a JSON Schema the model sees
//! ([`ToolSpec`]), and acts only beneath the [`Workspace`] root.
//!
//! | tool | does |
//! |---|---|
//! | `file_read` | reads a text file (optionally a line range) |
//! | `file_write` | creates or replaces a file, creating parent directories |
//! | `file_edit` | replaces one exact string; fails on zero or several matches |
//! | `list_dir` | lists a directory |
//! | `search` | regex search over the tree, respecting `.gitignore` |
//! | `execute_command` | `sh -c` in the workspace, with a timeout and an output cap |
//! | `git_status`, `git_diff`, `git_log`, `git_commit` | git in the workspace |
//!
//! A refused path or a failed call is a [`ToolError`]: the agent loop shows it to the
//! model as an error result; it never ends the run.

mod execute_command;
mod file_edit;
mod file_read;
mod file_write;
mod git;
mod list_dir;
mod output;
mod search;
mod summary;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::workspace::{Workspace, WorkspaceError};
pub use boitata_protocol::ToolSpec;
pub use summary::{call_summary, MAX_SUMMARY_CHARS};

/// Limits that apply to every tool call.
#[derive(Debug, Clone)]
pub struct ToolLimits {
    /// How long `execute_command` (and git) may run before the process group is killed.
    pub command_timeout: Duration,
    /// The most output a tool returns to the model, in bytes; the rest is cut with a marker.
    pub max_output_bytes: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            command_timeout: Duration::from_secs(120),
            max_output_bytes: 32 * 1024,
        }
    }
}

/// What a tool call runs with.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The confined workspace.
    pub workspace: Workspace,
    /// Cancelled when the turn or run is cancelled; long tools must stop promptly.
    pub cancel: CancellationToken,
    /// The exact environment commands get (never the agent's own: it holds keys).
    pub command_env: BTreeMap<String, String>,
    /// Timeouts and caps.
    pub limits: ToolLimits,
}

/// Why a tool call failed. Shown to the model as the tool's error output.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments did not match the tool's schema.
    #[error("invalid arguments for {tool}: {message}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What was wrong.
        message: String,
    },
    /// A path was refused or a file operation failed.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// No tool by that name.
    #[error("unknown tool {name:?} (tools: {available})")]
    UnknownTool {
        /// The name the model asked for.
        name: String,
        /// The tools there are, comma-separated.
        available: String,
    },
    /// The tool ran and failed (a non-matching edit, a git error, …).
    #[error("{0}")]
    Failed(String),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// One tool.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Its name, description and argument schema.
    fn spec(&self) -> ToolSpec;

    /// Runs it with `arguments` (a JSON object), returning the text the model sees.
    ///
    /// # Errors
    /// [`ToolError`] for refused paths, bad arguments and failures.
    async fn call(
        &self,
        ctx: &ToolContext,
        arguments: serde_json::Value,
    ) -> Result<String, ToolError>;
}

/// Parses a tool's JSON arguments into its argument type. `null` counts as `{}` (some
/// providers send no input for a tool without required arguments).
fn parse_arguments<T: DeserializeOwned>(
    tool: &str,
    arguments: serde_json::Value,
) -> Result<T, ToolError> {
    let arguments = if arguments.is_null() {
        serde_json::Value::Object(serde_json::Map::new())
    } else {
        arguments
    };
    serde_json::from_value(arguments).map_err(|e| ToolError::InvalidArguments {
        tool: tool.to_owned(),
        message: e.to_string(),
    })
}

/// The JSON Schema of the `path` argument of the tools that take one file.
fn file_path_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "string",
        "description": "The file, relative to the workspace root (an absolute path inside the root is accepted)."
    })
}

/// Runs blocking filesystem work on `ctx`'s workspace off the async runtime's worker
/// threads.
async fn blocking<T, F>(ctx: &ToolContext, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(&Workspace) -> Result<T, ToolError> + Send + 'static,
{
    let workspace = ctx.workspace.clone();
    tokio::task::spawn_blocking(move || work(&workspace))
        .await
        .map_err(|e| ToolError::Failed(format!("the tool stopped unexpectedly: {e}")))?
}

/// A built-in tool: its name, description and argument schema, which the model sees,
/// and a call that takes its arguments already parsed. [`Toolbox::standard`] holds each
/// as a [`Builtin`], the [`Tool`] that parses them.
#[async_trait]
trait BuiltinTool: Send + Sync + 'static {
    /// The name the model calls it by.
    const NAME: &'static str;
    /// What it does, for the model.
    const DESCRIPTION: &'static str;
    /// Its arguments, parsed from the call's JSON by [`parse_arguments`].
    type Arguments: DeserializeOwned + Send;

    /// The JSON Schema of [`Self::Arguments`].
    fn parameters() -> serde_json::Value;

    /// Runs it, returning the text the model sees.
    ///
    /// # Errors
    /// [`ToolError`] for refused paths, bad arguments and failures.
    async fn run(&self, ctx: &ToolContext, args: Self::Arguments) -> Result<String, ToolError>;

    /// A [`ToolError::InvalidArguments`] naming this tool.
    fn invalid(message: impl Into<String>) -> ToolError {
        ToolError::InvalidArguments {
            tool: Self::NAME.to_owned(),
            message: message.into(),
        }
    }
}

/// The [`Tool`] a [`BuiltinTool`] is: builds its [`ToolSpec`] and parses its arguments.
struct Builtin<T>(T);

#[async_trait]
impl<T: BuiltinTool> Tool for Builtin<T> {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: T::NAME.into(),
            description: T::DESCRIPTION.into(),
            parameters: T::parameters(),
        }
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        arguments: serde_json::Value,
    ) -> Result<String, ToolError> {
        let args = parse_arguments(T::NAME, arguments)?;
        self.0.run(ctx, args).await
    }
}

/// The set of tools an agent has, by name.
#[derive(Clone, Default)]
pub struct Toolbox {
    /// Each tool with its name, so a call does not rebuild every spec to find it.
    tools: Vec<(String, Arc<dyn Tool>)>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|(name, _)| name))
            .finish()
    }
}

impl Toolbox {
    /// A toolbox of exactly these tools.
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        Toolbox {
            tools: tools
                .into_iter()
                .map(|tool| (tool.spec().name, tool))
                .collect(),
        }
    }

    /// Every built-in tool.
    pub fn standard() -> Self {
        Toolbox::new(vec![
            Arc::new(Builtin(file_read::FileRead)),
            Arc::new(Builtin(file_write::FileWrite)),
            Arc::new(Builtin(file_edit::FileEdit)),
            Arc::new(Builtin(list_dir::ListDir)),
            Arc::new(Builtin(search::Search)),
            Arc::new(Builtin(execute_command::ExecuteCommand)),
            Arc::new(Builtin(git::GitStatus)),
            Arc::new(Builtin(git::GitDiff)),
            Arc::new(Builtin(git::GitLog)),
            Arc::new(Builtin(git::GitCommit)),
        ])
    }

    /// The specs the model sees.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|(_, t)| t.spec()).collect()
    }

    /// Calls the tool named `name`.
    ///
    /// # Errors
    /// [`ToolError::UnknownTool`], or the tool's own error.
    pub async fn call(
        &self,
        ctx: &ToolContext,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<String, ToolError> {
        let Some((_, tool)) = self.tools.iter().find(|(n, _)| n == name) else {
            return Err(ToolError::UnknownTool {
                name: name.to_owned(),
                available: self
                    .tools
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        tool.call(ctx, arguments).await
    }
}
