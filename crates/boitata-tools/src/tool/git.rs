//! The git tools: `git_status`, `git_diff`, `git_log`, `git_commit`.
//!
//! Each runs the `git` binary as a child process in the workspace root, the way
//! `execute_command` runs a shell: exactly the tool context's `command_env`, no stdin,
//! its own process group, the command timeout and the output cap. Git only uses the
//! repository at the workspace root, and only as its own work tree:
//! - `<root>/.git` must be a real directory: not a `gitdir:` file and not a symlink,
//!   either of which could name a repository anywhere on the host; nor may it hold a
//!   `commondir` file (a linked worktree's pointer to another repository's refs and
//!   objects);
//! - `GIT_DIR=<root>/.git` and `GIT_WORK_TREE=<root>` are set explicitly, which beats a
//!   `core.worktree` written into `.git/config`, and `GIT_CEILING_DIRECTORIES` stops
//!   discovery above the root;
//! - path arguments go through the workspace's path rules and are passed as literal
//!   pathspecs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::{BuiltinTool, ToolContext, ToolError};
use crate::process::{ChildCommand, ChildOutput, Ending};

/// The identity a commit gets when git has none configured.
const FALLBACK_NAME: &str = "boitata";
const FALLBACK_EMAIL: &str = "boitata@localhost";
/// `git_log`'s default and largest `max_count`.
const DEFAULT_LOG_COUNT: u32 = 10;
const MAX_LOG_COUNT: u32 = 200;

/// Runs `git ARGS` in the workspace; its output, or an error if it did not exit 0.
async fn git<I, A>(ctx: &ToolContext, args: I) -> Result<String, ToolError>
where
    I: IntoIterator<Item = A>,
    A: Into<OsString>,
{
    git_exiting(ctx, &[0], args).await
}

/// Runs `git ARGS` in the workspace; its output when it exits with one of `ok_codes`,
/// else an error naming the subcommand and how it ended.
async fn git_exiting<I, A>(
    ctx: &ToolContext,
    ok_codes: &[i32],
    args: I,
) -> Result<String, ToolError>
where
    I: IntoIterator<Item = A>,
    A: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let root = ctx.workspace.root();
    let git_dir = repository_dir(root)?;
    let mut env = ctx.command_env.clone();
    // Explicit, so neither a `core.worktree` in .git/config nor a variable in the
    // command environment can point git elsewhere.
    for name in ["GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"] {
        env.remove(name);
    }
    env.insert("GIT_DIR".into(), git_dir.to_string_lossy().into_owned());
    env.insert("GIT_WORK_TREE".into(), root.to_string_lossy().into_owned());
    if let Some(parent) = root.parent() {
        env.insert(
            "GIT_CEILING_DIRECTORIES".into(),
            parent.to_string_lossy().into_owned(),
        );
    }
    let run = ChildCommand::new("git", ctx.workspace.root())
        .args(["--no-pager", "--literal-pathspecs", "-c", "color.ui=false"])
        .args(args.iter().cloned())
        .env(env)
        .timeout(ctx.limits.command_timeout)
        .max_output_bytes(ctx.limits.max_output_bytes)
        .run(&ctx.cancel)
        .await
        .map_err(|e| ToolError::Failed(format!("{e} (is git installed and on PATH?)")))?;
    match run.ending {
        Ending::Exited(code) if ok_codes.contains(&code) => Ok(run.output),
        Ending::Cancelled => Err(ToolError::Cancelled),
        _ => Err(failure(&args, run)),
    }
}

/// `<root>/.git`, if it is a real directory that is a repository of its own.
///
/// # Errors
/// [`ToolError::Failed`] when there is no `.git`, or it is a file or a symlink (which
/// could name a repository outside the workspace), or it holds a `commondir` file.
fn repository_dir(root: &Path) -> Result<PathBuf, ToolError> {
    let git_dir = root.join(".git");
    let refuse = |why: &str| {
        Err(ToolError::Failed(format!(
            "not a git repository the git tools can use: {why} (run `git init` in the \
             workspace root, or use execute_command)"
        )))
    };
    match std::fs::symlink_metadata(&git_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            refuse("the workspace root has no .git directory")
        }
        Err(e) => refuse(&format!("cannot inspect .git: {e}")),
        Ok(meta) if meta.file_type().is_symlink() => {
            refuse(".git is a symlink, which may lead outside the workspace")
        }
        Ok(meta) if !meta.is_dir() => refuse(
            ".git is a file (a gitdir link to a repository that may lie outside the workspace)",
        ),
        Ok(_) => match std::fs::symlink_metadata(git_dir.join("commondir")) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(git_dir),
            _ => refuse(".git/commondir points at another repository's refs and objects"),
        },
    }
}

fn failure(args: &[OsString], run: ChildOutput) -> ToolError {
    // `-c key=value` pairs are ours (the fallback identity): name the subcommand only.
    let mut shown = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == "-c" {
            words.next();
        } else {
            shown.push(word.to_string_lossy());
        }
    }
    let command = shown.join(" ");
    let how = match run.ending {
        Ending::Exited(code) => format!("exit code {code}"),
        Ending::Signalled(signal) => format!("killed by signal {signal}"),
        Ending::TimedOut(after) => format!("timed out after {}", humantime::format_duration(after)),
        Ending::Cancelled => "cancelled".to_owned(),
    };
    // Git's output (stdout and stderr, one pipe) says why; its last line, usually the
    // verdict (`nothing to commit, working tree clean`), goes on the first line, which
    // is all a one-line view shows.
    let output = run.output.trim_end();
    let verdict = output
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("git printed nothing");
    if output
        .lines()
        .filter(|line| !line.trim().is_empty())
        .count()
        > 1
    {
        ToolError::Failed(format!("git {command} failed ({how}): {verdict}\n{output}"))
    } else {
        ToolError::Failed(format!("git {command} failed ({how}): {verdict}"))
    }
}

/// A path argument made relative to the workspace root, refused if it leaves it.
fn pathspec(ctx: &ToolContext, path: Option<&str>) -> Result<OsString, ToolError> {
    match path {
        Some(path) => Ok(ctx.workspace.relative(path)?.into_os_string()),
        None => Ok(".".into()),
    }
}

/// `git_status`.
pub(super) struct GitStatus;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoArguments {}

#[async_trait]
impl BuiltinTool for GitStatus {
    const NAME: &'static str = "git_status";
    const DESCRIPTION: &'static str =
        "Show the git status of the workspace: the branch, then one line per \
        changed file in `git status --short` form (XY path: X = staged, Y = unstaged; \
        ?? = untracked).";
    type Arguments = NoArguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {},
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, _: NoArguments) -> Result<String, ToolError> {
        let mut text = git(ctx, ["status", "--short", "--branch", "--", "."]).await?;
        if text.lines().all(|line| line.starts_with("##")) {
            text.push_str("(working tree clean)");
        }
        Ok(text)
    }
}

/// `git_diff`.
pub(super) struct GitDiff;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DiffArguments {
    #[serde(default)]
    staged: bool,
    path: Option<String>,
}

#[async_trait]
impl BuiltinTool for GitDiff {
    const NAME: &'static str = "git_diff";
    const DESCRIPTION: &'static str =
        "Show changes in the workspace as a unified diff: by default the \
        unstaged changes (working tree against the index); with `staged: true` the \
        changes staged for the next commit. Untracked files are not shown (see \
        git_status). Output beyond the tool output limit is cut with a note.";
    type Arguments = DiffArguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "staged": {
                    "type": "boolean",
                    "description": "Show the staged changes (git diff --staged) instead of the unstaged ones. Default: false."
                },
                "path": {
                    "type": "string",
                    "description": "Limit the diff to this file or directory, relative to the workspace root."
                }
            },
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, args: DiffArguments) -> Result<String, ToolError> {
        let mut command: Vec<OsString> = vec!["diff".into(), "--no-ext-diff".into()];
        if args.staged {
            command.push("--staged".into());
        }
        command.push("--".into());
        command.push(pathspec(ctx, args.path.as_deref())?);
        let text = git(ctx, command).await?;
        if text.is_empty() {
            return Ok(if args.staged {
                "(no staged changes)".into()
            } else {
                "(no unstaged changes)".into()
            });
        }
        Ok(text)
    }
}

/// `git_log`.
pub(super) struct GitLog;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LogArguments {
    max_count: Option<u32>,
}

#[async_trait]
impl BuiltinTool for GitLog {
    const NAME: &'static str = "git_log";
    const DESCRIPTION: &'static str =
        "Show the most recent commits of the current branch, newest first: \
        hash, author, date and message of each.";
    type Arguments = LogArguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "max_count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LOG_COUNT,
                    "description": format!("How many commits to show. Default: {DEFAULT_LOG_COUNT}.")
                }
            },
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, args: LogArguments) -> Result<String, ToolError> {
        let count = args.max_count.unwrap_or(DEFAULT_LOG_COUNT);
        if !(1..=MAX_LOG_COUNT).contains(&count) {
            return Err(Self::invalid(format!(
                "max_count must be between 1 and {MAX_LOG_COUNT}"
            )));
        }
        git(
            ctx,
            [
                "log".to_owned(),
                format!("--max-count={count}"),
                "--date=iso".to_owned(),
                "--no-decorate".to_owned(),
            ],
        )
        .await
    }
}

/// `git_commit`.
pub(super) struct GitCommit;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CommitArguments {
    message: String,
    #[serde(default)]
    all: bool,
}

#[async_trait]
impl BuiltinTool for GitCommit {
    const NAME: &'static str = "git_commit";
    const DESCRIPTION: &'static str =
        "Commit the staged changes with a message. With `all: true`, first \
        stage every change in the workspace (new, modified and deleted files, except \
        those ignored by .gitignore). Fails if there is nothing to commit. Uses the \
        configured git identity, or boitata <boitata@localhost> when none is set.";
    type Arguments = CommitArguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "message": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The commit message: a short summary line, optionally a blank line and details."
                },
                "all": {
                    "type": "boolean",
                    "description": "Stage all changes in the workspace before committing (git add -A). Default: false."
                }
            },
            "required": ["message"],
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, args: CommitArguments) -> Result<String, ToolError> {
        if args.message.trim().is_empty() {
            return Err(Self::invalid("message is empty; describe the change"));
        }
        if args.all {
            git(ctx, ["add", "--all", "--", "."]).await?;
        }
        let mut command: Vec<OsString> = Vec::new();
        let (has_name, has_email) = configured_identity(ctx).await?;
        if !has_name {
            command.extend(["-c".into(), format!("user.name={FALLBACK_NAME}").into()]);
        }
        if !has_email {
            command.extend(["-c".into(), format!("user.email={FALLBACK_EMAIL}").into()]);
        }
        command.push("commit".into());
        command.push(format!("--message={}", args.message).into());
        git(ctx, command).await
    }
}

/// Whether git has a `user.name` and a `user.email` in any config it reads.
async fn configured_identity(ctx: &ToolContext) -> Result<(bool, bool), ToolError> {
    // Exit 1: no such key anywhere.
    let output = git_exiting(
        ctx,
        &[0, 1],
        ["config", "--get-regexp", r"^user\.(name|email)$"],
    )
    .await?;
    let has = |key: &str| {
        output.lines().any(|line| {
            line.strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(' '))
                .is_some_and(|value| !value.trim().is_empty())
        })
    };
    Ok((has("user.name"), has("user.email")))
}
