//! `exec` on the host: `sh -c COMMAND` in the workspace (or in its `workdir`: relative
//! to the workspace, or absolute).
//!
//! The command gets a closed stdin, an explicit environment (the allowlisted
//! variables of [`COMMAND_ENV_ALLOWLIST`], then `BOITATA_RUN_ID` and `BOITATA_NODE`,
//! then the node's `env`; never the provider's keys) and its own process group. Its
//! stdout and stderr are streamed as `exec_output` events. When it exits, or when the
//! node is cancelled (SIGTERM, then SIGKILL after a grace period), the whole process
//! group is killed, so a `sleep 300 &` it left behind cannot outlive it or hold the
//! output pipes open.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use boitata_core::runtime::COMMAND_ENV_ALLOWLIST;
use boitata_core::{Emitter, EventPayload, OutputStream};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::ExecOutputBuffer;
use crate::model::{Node, NodeSpec};
use crate::node::{NodeContext, NodeError, NodeHandler, NodeOutcome};

/// The `PATH` a command gets when the run's environment has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How much of the end of stdout becomes the node's output, in bytes.
pub const EXEC_OUTPUT_TAIL_BYTES: usize = 64 * 1024;

/// How long a cancelled command has between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// How long output is still read after the command exits and its group is killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Runs `exec` nodes without `container` on the host. Output: the last
/// [`EXEC_OUTPUT_TAIL_BYTES`] of stdout; outcome: success iff exit code 0 (a command
/// killed by signal N exits 128+N).
#[derive(Debug, Clone, Copy, Default)]
pub struct HostExec;

#[async_trait]
impl NodeHandler for HostExec {
    async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
        let NodeSpec::Exec(spec) = &node.spec else {
            return Err(NodeError::Invalid(format!(
                "node {:?}: host exec cannot run a {} node",
                node.id,
                node.node_type()
            )));
        };
        if let Some(container) = &spec.container {
            return Err(NodeError::Invalid(format!(
                "node {:?}: runs in container {container:?}, which needs a sandbox backend",
                node.id
            )));
        }
        let env = command_env(node, ctx);
        // A relative workdir is taken from the workspace; an absolute one as it is.
        let cwd = match spec.workdir.as_deref().map(str::trim) {
            Some(dir) if !dir.is_empty() => ctx.workspace().join(dir),
            _ => ctx.workspace().to_path_buf(),
        };
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&spec.command)
            .current_dir(&cwd)
            .env_clear()
            .envs(&env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| NodeError::Io {
                action: format!(
                    "node {:?}: cannot start sh -c in {}",
                    node.id,
                    cwd.display()
                ),
                source,
            })?;
        let group = ProcessGroup(child.id().and_then(|id| i32::try_from(id).ok()));

        let stdout = child.stdout.take().map(|out| {
            tokio::spawn(pump(
                out,
                OutputStream::Stdout,
                ctx.emitter().clone(),
                ctx.node_id().to_owned(),
            ))
        });
        let stderr = child.stderr.take().map(|err| {
            tokio::spawn(pump(
                err,
                OutputStream::Stderr,
                ctx.emitter().clone(),
                ctx.node_id().to_owned(),
            ))
        });

        let wait = tokio::select! {
            status = child.wait() => status,
            _ = ctx.cancel().cancelled() => {
                group.signal(Signal::SIGTERM);
                match tokio::time::timeout(TERM_GRACE, child.wait()).await {
                    Ok(status) => status,
                    Err(_) => {
                        group.signal(Signal::SIGKILL);
                        child.wait().await
                    }
                }
            }
        };
        // Whatever the shell left behind goes with it.
        group.signal(Signal::SIGKILL);
        let status = wait.map_err(|source| NodeError::Io {
            action: format!("node {:?}: cannot wait for sh -c", node.id),
            source,
        })?;

        let tail = match stdout {
            Some(task) => drain(task).await,
            None => Vec::new(),
        };
        if let Some(task) = stderr {
            drain(task).await;
        }
        drop(group);
        let exit_code = exit_code(&status);
        let output = String::from_utf8_lossy(&tail).into_owned();
        Ok(NodeOutcome::from_exit_code(exit_code, output))
    }
}

/// The command's environment: allowlisted variables, the run's ids, the node's env.
fn command_env(node: &Node, ctx: &NodeContext) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = COMMAND_ENV_ALLOWLIST
        .iter()
        .filter_map(|name| ctx.env_var(name).map(|v| ((*name).to_owned(), v)))
        .collect();
    env.entry("PATH".to_owned())
        .or_insert_with(|| DEFAULT_PATH.to_owned());
    env.insert("BOITATA_RUN_ID".to_owned(), ctx.run_id().to_owned());
    env.insert("BOITATA_NODE".to_owned(), ctx.node_id().to_owned());
    env.extend(node.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

#[cfg(unix)]
fn exit_code(status: &std::process::ExitStatus) -> i64 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => i64::from(code),
        (None, Some(signal)) => 128 + i64::from(signal),
        (None, None) => -1,
    }
}

/// A process group killed (SIGKILL) when dropped, so no path out of
/// [`HostExec::run`] (an error, a panic, an aborted task) leaves it running.
struct ProcessGroup(Option<i32>);

impl ProcessGroup {
    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.0 {
            // ESRCH (the group is gone) is the expected case after the command exits.
            let _ = killpg(Pid::from_raw(pgid), signal);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}

/// Waits a little for a reader to see EOF, then gives up on it.
async fn drain(task: tokio::task::JoinHandle<Vec<u8>>) -> Vec<u8> {
    let abort = task.abort_handle();
    match tokio::time::timeout(DRAIN_GRACE, task).await {
        Ok(Ok(tail)) => tail,
        Ok(Err(_)) => Vec::new(),
        Err(_) => {
            abort.abort();
            Vec::new()
        }
    }
}

/// Reads `reader` to the end, emitting each chunk as `exec_output`; returns its last
/// [`EXEC_OUTPUT_TAIL_BYTES`] bytes.
async fn pump(
    mut reader: impl AsyncRead + Unpin,
    stream: OutputStream,
    emitter: Emitter,
    node: String,
) -> Vec<u8> {
    let mut buf = vec![0u8; 8192];
    let mut output = ExecOutputBuffer::default();
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(chunk) = output.push(&buf[..n]) {
            emitter.emit_or_log(Some(&node), EventPayload::ExecOutput { stream, chunk });
        }
    }
    if let Some(chunk) = output.finish() {
        emitter.emit_or_log(Some(&node), EventPayload::ExecOutput { stream, chunk });
    }
    output.into_tail()
}
