//! A temp workspace with a scripted model session, and the agent binary run on it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Long enough for anything that should happen; a test that waits this long has failed.
pub(super) const PATIENCE: Duration = Duration::from_secs(60);

/// The per-run secret the tests give the agent.
pub(super) const SECRET: &str = "run-secret-5c1e0d0f-not-a-real-one";
/// A provider key the agent's environment holds (the scripted provider ignores it).
pub(super) const OPENAI_KEY: &str = "openai-key-a1b2c3-not-a-real-one";
/// Another key in the agent's environment.
pub(super) const ANTHROPIC_KEY: &str = "anthropic-key-d4e5f6-not-a-real-one";

/// The binary under test.
pub(super) fn agent_bin() -> &'static str {
    env!("CARGO_BIN_EXE_boitata-agent")
}

/// A temp dir holding the workspace, the scripted model session, an empty config file
/// and a home directory, so nothing of the machine's own settings leaks in.
pub(super) struct Scenario {
    dir: tempfile::TempDir,
}

impl Scenario {
    /// A workspace with `README.md` and `hello.txt`, and `script` as the model session.
    pub(super) fn new(script: Value) -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(workspace.join("README.md"), "# demo\n").unwrap();
        std::fs::write(workspace.join("hello.txt"), "hello\n").unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::write(dir.path().join("boitata.toml"), "").unwrap();
        std::fs::write(
            dir.path().join("script.json"),
            serde_json::to_string_pretty(&script).unwrap(),
        )
        .unwrap();
        Scenario { dir }
    }

    /// The workspace, resolved (what sessions must use as `cwd`).
    pub(super) fn workspace(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path().join("workspace")).unwrap()
    }

    pub(super) fn config(&self) -> PathBuf {
        self.dir.path().join("boitata.toml")
    }

    /// The environment the agent is launched with: a bare PATH and HOME, the scripted
    /// provider, the run secret and two API keys it must never pass on.
    pub(super) fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            (
                "HOME".into(),
                self.dir.path().join("home").display().to_string(),
            ),
            ("BOITATA_PROVIDER".into(), "scripted".into()),
            (
                "BOITATA_SCRIPT".into(),
                self.dir.path().join("script.json").display().to_string(),
            ),
            ("BOITATA_AGENT_SECRET".into(), SECRET.into()),
            ("OPENAI_API_KEY".into(), OPENAI_KEY.into()),
            ("ANTHROPIC_API_KEY".into(), ANTHROPIC_KEY.into()),
        ];
        if let Ok(log) = std::env::var("RUST_LOG") {
            env.push(("RUST_LOG".into(), log));
        }
        env
    }

    /// `boitata-agent ARGS --workspace WS --config CFG` in the workspace, with
    /// [`Scenario::env`] and nothing else.
    pub(super) fn command(&self, args: &[&str]) -> Command {
        self.command_via(&[], args)
    }

    /// [`Scenario::command`] started through `launcher` (a program and its arguments,
    /// such as `setpriv --reuid=…`), which then runs the agent.
    pub(super) fn command_via(&self, launcher: &[&str], args: &[&str]) -> Command {
        let mut command = match launcher.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(agent_bin());
                command
            }
            None => Command::new(agent_bin()),
        };
        command
            .args(args)
            .arg("--workspace")
            .arg(self.workspace())
            .arg("--config")
            .arg(self.config())
            .current_dir(self.workspace())
            .env_clear()
            .envs(self.env())
            .kill_on_drop(true);
        command
    }
}

/// `boitata-agent --addr 127.0.0.1:0`, running, with the address it logged.
pub(super) struct TcpAgent {
    pub(super) child: Child,
    pub(super) addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl TcpAgent {
    /// Starts it and waits for `listening on ADDR` on its stderr.
    pub(super) async fn start(scenario: &Scenario) -> TcpAgent {
        TcpAgent::spawn(scenario.command(&["--addr", "127.0.0.1:0"])).await
    }

    /// Starts `command` (an agent serving TCP) and waits for `listening on ADDR`.
    pub(super) async fn spawn(mut command: Command) -> TcpAgent {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let log = stderr.clone();
        tokio::spawn(async move {
            let mut addr_tx = Some(addr_tx);
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(addr) = line.strip_prefix("boitata-agent: listening on ") {
                    if let Some(tx) = addr_tx.take() {
                        let _ = tx.send(addr.parse::<SocketAddr>().unwrap());
                    }
                }
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let addr = match tokio::time::timeout(PATIENCE, addr_rx).await {
            Ok(Ok(addr)) => addr,
            _ => panic!(
                "boitata-agent never listened; stderr:\n{}",
                stderr.lock().unwrap()
            ),
        };
        TcpAgent {
            child,
            addr,
            stderr,
        }
    }

    /// Everything it wrote on stderr so far.
    pub(super) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGTERM.
    pub(super) fn terminate(&self) {
        let pid = self.child.id().expect("the agent already exited") as i32;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    }

    /// Waits for it to exit; its exit code.
    pub(super) async fn exit_code(mut self) -> Option<i32> {
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the agent did not exit; stderr:\n{}", self.stderr()))
            .unwrap();
        status.code()
    }
}

/// Where `scripts/setup-acp-python.sh` puts the Python SDK's virtualenv, unless
/// `BOITATA_ACP_PY_VENV` says otherwise.
pub(super) fn python_venv() -> PathBuf {
    match std::env::var_os("BOITATA_ACP_PY_VENV") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/acp-py-venv"),
    }
}
