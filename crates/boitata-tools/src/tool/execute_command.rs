//! `execute_command`: a shell command in the workspace, with a timeout and an output cap.
//!
//! Not confined like the file tools: the command runs on the host with the user's
//! rights. What it does get: the workspace root as its working directory, exactly the
//! tool context's `command_env`, `/dev/null` as stdin, its own session and process group,
//! and a kill of that whole group at the deadline or on cancellation (see
//! [`crate::process`]).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::output::ensure_newline;
use super::{BuiltinTool, ToolContext, ToolError};
use crate::process::{ChildCommand, ChildOutput, Ending};

/// The shell commands run with.
const SHELL: &str = "/bin/sh";

/// Runs `sh -c COMMAND` in the workspace root.
pub(super) struct ExecuteCommand;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Arguments {
    command: String,
    timeout_secs: Option<u64>,
}

#[async_trait]
impl BuiltinTool for ExecuteCommand {
    const NAME: &'static str = "execute_command";
    const DESCRIPTION: &'static str =
        "Run a shell command (`sh -c`) in the workspace root and return its \
        combined stdout and stderr, in the order written, followed by its exit code. \
        Stdin is empty (/dev/null) and there is no terminal, so interactive commands \
        fail rather than wait: pass flags such as `-y` or `--no-pager`. The command is \
        killed, with everything it started, when it exceeds its timeout; processes it \
        leaves running in the background are stopped when it exits, so start a server \
        and test it within one command. Output beyond the tool output limit is cut in \
        the middle (the start and the end are kept) with a note of how many bytes were \
        cut.";
    type Arguments = Arguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The shell command line, run with /bin/sh -c in the workspace root."
                },
                "timeout_secs": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Seconds before the command is killed. Default and upper bound: the configured command timeout (larger values are lowered to it)."
                }
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, args: Arguments) -> Result<String, ToolError> {
        if args.command.trim().is_empty() {
            return Err(Self::invalid("command is empty"));
        }
        let max_timeout = ctx.limits.command_timeout;
        let timeout = match args.timeout_secs {
            Some(0) => return Err(Self::invalid("timeout_secs must be at least 1")),
            Some(secs) => Duration::from_secs(secs).min(max_timeout),
            None => max_timeout,
        };
        let run = ChildCommand::new(SHELL, ctx.workspace.root())
            .arg("-c")
            .arg(&args.command)
            .env(ctx.command_env.clone())
            .timeout(timeout)
            .max_output_bytes(ctx.limits.max_output_bytes)
            .run(&ctx.cancel)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        report(run)
    }
}

/// The text the model sees: the output, then one line of how it ended.
fn report(run: ChildOutput) -> Result<String, ToolError> {
    let mut text = run.output;
    ensure_newline(&mut text);
    if run.stopped_leftovers {
        text.push_str("[processes the command left running in the background were stopped]\n");
    }
    match run.ending {
        Ending::Exited(code) => {
            text.push_str(&format!("[exit code: {code}]"));
            Ok(text)
        }
        Ending::Signalled(signal) => {
            text.push_str(&format!("[killed by signal {signal}]"));
            Ok(text)
        }
        Ending::TimedOut(after) => {
            text.push_str(&format!(
                "[timed out after {}: the command and every process it started were killed]",
                humantime::format_duration(after)
            ));
            Err(ToolError::Failed(text))
        }
        Ending::Cancelled => Err(ToolError::Cancelled),
    }
}
