//! A real `boitata-server` process for tests: started on a free port, read for its
//! address, killed (SIGKILL) on drop.
//!
//! ```no_run
//! use boitata_test_support::server::{ServerProcess, workspace_binary};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let server = ServerProcess::builder(workspace_binary("boitata-server"))
//!     .arg("--blueprints-dir").arg(dir.path())
//!     .arg("--data-dir").arg(dir.path().join("data"))
//!     .start();
//! let url = server.url(); // http://127.0.0.1:PORT
//! # let _ = url;
//! ```
//!
//! The process gets `--bind 127.0.0.1:0` unless the arguments set `--bind`, and an
//! environment without `BOITATA_API_TOKEN`, `BOITATA_CONFIG` and `BOITATA_DATA_DIR`
//! (pass them with [`ServerBuilder::env`] when a test wants them). Without
//! `--config`, an empty config file is passed so the developer's own config is not
//! read.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the server prints once it listens: `boitata-server listening on http://ADDR`.
pub const LISTENING: &str = "listening on http://";

/// How to start a server process.
#[derive(Debug)]
pub struct ServerBuilder {
    binary: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(String, String)>,
}

impl ServerBuilder {
    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.envs.push((name.to_owned(), value.to_owned()));
        self
    }

    fn command(&self, config_dir: &Path) -> Command {
        let mut command = Command::new(&self.binary);
        command.args(&self.args);
        let has = |flag: &str| {
            self.args.iter().any(|a| {
                a.to_str()
                    .is_some_and(|a| a == flag || a.starts_with(&format!("{flag}=")))
            })
        };
        if !has("--bind") {
            command.args(["--bind", "127.0.0.1:0"]);
        }
        if !has("--config") {
            let config = config_dir.join("empty-config.toml");
            std::fs::write(&config, "").unwrap();
            command.arg("--config").arg(config);
        }
        for name in [
            "BOITATA_API_TOKEN",
            "BOITATA_CONFIG",
            "BOITATA_DATA_DIR",
            "BOITATA_BLUEPRINTS_DIR",
        ] {
            command.env_remove(name);
        }
        command.env("BOITATA_LOG", "info");
        for (name, value) in &self.envs {
            command.env(name, value);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command
    }

    /// Starts the server and waits (up to 60 s) until it listens.
    ///
    /// # Panics
    /// When it exits first or does not listen in time; the message holds its stderr.
    pub fn start(self) -> ServerProcess {
        let config_dir = tempfile::tempdir().unwrap();
        let mut child = self
            .command(config_dir.path())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some((_, addr)) = line.split_once(LISTENING) {
                    let _ = tx.send(format!("http://{}", addr.trim()));
                }
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(url) = rx.recv_timeout(Duration::from_millis(50)) {
                return ServerProcess {
                    child,
                    url,
                    log,
                    _config_dir: config_dir,
                };
            }
            if let Some(status) = child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "boitata-server exited ({status}) before listening:\n{}",
                    log.lock().unwrap()
                );
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "boitata-server did not listen within 60s:\n{}",
                    log.lock().unwrap()
                );
            }
        }
    }

    /// Runs the server expecting it to exit by itself (a refused start); returns its
    /// exit status and stderr. Kills it after 30 s.
    pub fn run_to_exit(self) -> (ExitStatus, String) {
        let config_dir = tempfile::tempdir().unwrap();
        let mut child = self.command(config_dir.path()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut text = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut text)
                    .unwrap();
                return (status, text);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("boitata-server was expected to exit, but was still running after 30s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A running server process.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    url: String,
    log: Arc<Mutex<String>>,
    _config_dir: tempfile::TempDir,
}

impl ServerProcess {
    /// A builder for `binary` (e.g. `env!("CARGO_BIN_EXE_boitata-server")`).
    pub fn builder(binary: impl Into<PathBuf>) -> ServerBuilder {
        ServerBuilder {
            binary: binary.into(),
            args: Vec::new(),
            envs: Vec::new(),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it wrote to stderr so far (its log).
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Kills it with SIGKILL (no cleanup runs) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits (up to `timeout`) for it to exit.
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The path of a binary of this workspace (`boitata-server`, `boitata`), built by
/// `cargo build` / `cargo nextest run --workspace` into the same target directory as
/// the running test. Builds it with `cargo build -p PACKAGE --bin NAME` when missing
/// (the package is the binary's name, or `boitata-cli` for `boitata`).
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test-binary>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binaries live in target/<profile>/deps");
    let path = profile_dir.join(name);
    if path.is_file() {
        return path;
    }
    let package = if name == "boitata" {
        "boitata-cli"
    } else {
        name
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command.args(["build", "-p", package, "--bin", name]);
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        command.arg("--release");
    }
    let status = command.status().unwrap();
    assert!(
        status.success(),
        "cargo build -p {package} --bin {name} failed"
    );
    assert!(
        path.is_file(),
        "{} is still missing after cargo build",
        path.display()
    );
    path
}

/// A TCP port free right now on 127.0.0.1 (for programs that cannot take port 0).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
