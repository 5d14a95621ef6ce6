//! The `boitata-agent` process inside a sandbox: where its files go, how it is
//! started, watched, read and stopped, all through the backend's `exec` and `upload`.
//!
//! Each launch gets a private directory (`mktemp -d /tmp/boitata-agent.XXXXXX`, mode
//! 0700) holding the agent's settings file, the scripted provider's script if any, its
//! pid file and its log (stdout and stderr). The process is started detached by a
//! small `sh` wrapper that writes the pid file and then `exec`s the agent, so the pid
//! is the agent's own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::archive;
use crate::sandbox::{CollectOutput, ExecSpec, ExecStatus, Sandbox, SandboxError, SandboxId};

/// The agent's program name, looked up on the sandbox's `PATH`.
pub(crate) const AGENT_PROGRAM: &str = "boitata-agent";

/// How much of the end of the agent's log an error quotes, in bytes.
pub(crate) const LOG_TAIL_BYTES: usize = 4096;

/// How long the agent has to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How long one of the small housekeeping commands below may take.
const HOUSEKEEPING_TIMEOUT: Duration = Duration::from_secs(30);

/// Exit code of [`PREPARE_SCRIPT`] when the agent program is missing.
const MISSING_AGENT: i64 = 3;

/// Makes the launch directory and prints the working directory, then the directory.
/// Exits [`MISSING_AGENT`] when `$1` is not on the `PATH`.
const PREPARE_SCRIPT: &str = r#"command -v "$1" >/dev/null 2>&1 || exit 3
dir=$(mktemp -d /tmp/boitata-agent.XXXXXX) || exit 1
pwd
printf '%s\n' "$dir"
"#;

/// Writes the pid file in `$1`, then becomes the agent (`$2…`), its output going to
/// the log in `$1` and its stdin closed.
const LAUNCH_SCRIPT: &str = r#"dir=$1
shift
echo $$ > "$dir/agent.pid"
exec "$@" > "$dir/agent.log" 2>&1 < /dev/null
"#;

/// Prints `starting` (no pid file yet), `running` or `exited`.
const STATUS_SCRIPT: &str = r#"pid=$(cat "$1/agent.pid" 2>/dev/null) || { echo starting; exit 0; }
if [ -e "/proc/$pid" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$pid/stat" 2>/dev/null; then
  echo running
else
  echo exited
fi
"#;

/// SIGTERM, up to `$2` tenths of a second for the agent to go, then SIGKILL.
const STOP_SCRIPT: &str = r#"pid=$(cat "$1/agent.pid" 2>/dev/null) || exit 0
kill -TERM "$pid" 2>/dev/null || exit 0
i=0
while [ "$i" -lt "$2" ] && kill -0 "$pid" 2>/dev/null; do
  sleep 0.1
  i=$((i + 1))
done
kill -KILL "$pid" 2>/dev/null
exit 0
"#;

/// Whether the agent process is alive, as [`AgentProcess::status`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AgentStatus {
    /// The wrapper has not written the pid file yet.
    Starting,
    /// The process is alive.
    Running,
    /// The process is gone.
    Exited,
}

/// Why the launch directory could not be made.
#[derive(Debug)]
pub(crate) enum PrepareError {
    /// `boitata-agent` is not on the sandbox's `PATH`.
    MissingAgent,
    /// The backend failed, or the script did.
    Sandbox(SandboxError),
    /// The script failed with this exit code and message.
    Failed(i64, String),
}

/// One launch of `boitata-agent` in a sandbox.
#[derive(Clone)]
pub(crate) struct AgentProcess {
    backend: Arc<dyn Sandbox>,
    sandbox: SandboxId,
    /// The launch directory inside the sandbox.
    dir: String,
    /// The sandbox's working directory: the agent's workspace root.
    workspace: String,
}

impl AgentProcess {
    /// Checks that the sandbox has the agent and makes a launch directory there.
    pub(crate) async fn prepare(
        backend: Arc<dyn Sandbox>,
        sandbox: SandboxId,
    ) -> Result<AgentProcess, PrepareError> {
        let spec = ExecSpec::new(["sh", "-c", PREPARE_SCRIPT, "boitata-prepare", AGENT_PROGRAM])
            .timeout(HOUSEKEEPING_TIMEOUT);
        let mut out = CollectOutput::default();
        let status = backend
            .exec(&sandbox, &spec, &mut out)
            .await
            .map_err(PrepareError::Sandbox)?;
        match status {
            ExecStatus::Exited(0) => {}
            ExecStatus::Exited(MISSING_AGENT) => return Err(PrepareError::MissingAgent),
            ExecStatus::Exited(code) => {
                return Err(PrepareError::Failed(
                    code,
                    out.stderr_text().trim().to_owned(),
                ))
            }
            other => {
                return Err(PrepareError::Failed(
                    -1,
                    format!("preparing the agent's directory ended with {other:?}"),
                ))
            }
        }
        let stdout = out.stdout_text();
        let mut lines = stdout.lines();
        match (lines.next(), lines.next()) {
            (Some(workspace), Some(dir)) if workspace.starts_with('/') && dir.starts_with('/') => {
                Ok(AgentProcess {
                    backend,
                    sandbox,
                    dir: dir.to_owned(),
                    workspace: workspace.to_owned(),
                })
            }
            _ => Err(PrepareError::Failed(
                0,
                format!("unexpected answer from the sandbox: {stdout:?}"),
            )),
        }
    }

    /// The sandbox's working directory, where the agent works.
    pub(crate) fn workspace(&self) -> &str {
        &self.workspace
    }

    /// The path of `name` in the launch directory.
    pub(crate) fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.dir)
    }

    /// Puts `contents` into the launch directory as `name` (mode 0644: no secret
    /// goes into a file) and returns its path inside the sandbox.
    pub(crate) async fn upload(&self, name: &str, contents: &[u8]) -> Result<String, SandboxError> {
        let tar =
            archive::single_file(name, contents, 0o644).map_err(|e| SandboxError::Backend {
                backend: self.backend.backend_name(),
                operation: "upload archive",
                source: Box::new(e),
            })?;
        self.backend.upload(&self.sandbox, tar, &self.dir).await?;
        Ok(self.path(name))
    }

    /// Starts `argv` (the agent and its arguments) detached, in the workspace, with
    /// `env` added to the sandbox's environment for this process only.
    pub(crate) async fn launch(
        &self,
        argv: Vec<String>,
        env: BTreeMap<String, String>,
    ) -> Result<(), SandboxError> {
        let mut command = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            LAUNCH_SCRIPT.to_owned(),
            "boitata-launch".to_owned(),
            self.dir.clone(),
        ];
        command.extend(argv);
        let mut spec = ExecSpec::new(command)
            .workdir(self.workspace.clone())
            .detached();
        spec.env = env;
        self.backend
            .exec(&self.sandbox, &spec, &mut CollectOutput::default())
            .await
            .map(|_| ())
    }

    /// Whether the agent is alive.
    pub(crate) async fn status(&self) -> Result<AgentStatus, SandboxError> {
        let out = self.run(STATUS_SCRIPT, &[]).await?;
        Ok(match out.trim() {
            "running" => AgentStatus::Running,
            "starting" => AgentStatus::Starting,
            _ => AgentStatus::Exited,
        })
    }

    /// Returns once the agent process is gone (checking every `every`), or never.
    /// A sandbox that cannot be asked any more counts as the agent being gone.
    pub(crate) async fn exited(&self, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            match self.status().await {
                Ok(AgentStatus::Exited) => return,
                Ok(_) => {}
                Err(e @ SandboxError::NotFound { .. }) => {
                    tracing::debug!("agent status: {e}");
                    return;
                }
                Err(e) => tracing::debug!("agent status unknown: {e}"),
            }
        }
    }

    /// The last [`LOG_TAIL_BYTES`] of the agent's log, or a note saying why there is
    /// none.
    pub(crate) async fn log_tail(&self) -> String {
        let script = format!("tail -c {LOG_TAIL_BYTES} \"$1/agent.log\" 2>/dev/null");
        match self.run(&script, &[]).await {
            Ok(text) if text.trim().is_empty() => "(the agent's log is empty)".to_owned(),
            Ok(text) => text.trim_end().to_owned(),
            Err(e) => format!("(the agent's log cannot be read: {e})"),
        }
    }

    /// Stops the agent: SIGTERM, then SIGKILL after a grace period. Failures are
    /// logged: the sandbox is destroyed at the end of the run anyway.
    pub(crate) async fn stop(&self) {
        let tenths = (STOP_GRACE.as_millis() / 100).to_string();
        if let Err(e) = self.run(STOP_SCRIPT, &[&tenths]).await {
            tracing::debug!(sandbox = %self.sandbox.short(), "stopping the agent: {e}");
        }
    }

    /// Runs `script` with `sh -c` and the launch directory as `$1` (then `args`);
    /// returns its stdout.
    async fn run(&self, script: &str, args: &[&str]) -> Result<String, SandboxError> {
        let mut argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            script.to_owned(),
            "boitata-agent-ctl".to_owned(),
            self.dir.clone(),
        ];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let spec = ExecSpec::new(argv).timeout(HOUSEKEEPING_TIMEOUT);
        let mut out = CollectOutput::default();
        self.backend.exec(&self.sandbox, &spec, &mut out).await?;
        Ok(out.stdout_text())
    }
}
