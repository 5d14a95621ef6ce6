//! The [`Sandbox`] backend trait and the types its operations take and return.
//!
//! A sandbox is an isolated machine a run's commands execute in: a container for the
//! [`docker`] backend, later a microVM or a Kubernetes pod behind the same trait. The
//! trait is deliberately small: [`provision`](Sandbox::provision),
//! [`exec`](Sandbox::exec), [`endpoint`](Sandbox::endpoint),
//! [`upload`](Sandbox::upload), [`destroy`](Sandbox::destroy) and
//! [`list`](Sandbox::list), plus run networks
//! ([`create_run_network`](Sandbox::create_run_network) and its kin, which a backend
//! without networks need not provide). Everything else (checkouts, teardown, host
//! rules, the egress proxy, the reaper) is built on top of it.
//!
//! Every sandbox carries labels ([`LABEL_RUN_ID`], [`LABEL_NODE`],
//! [`LABEL_CREATED_BY`], [`LABEL_PID`], [`LABEL_HOST`]) so that the reaper can find the
//! ones whose run is gone.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use async_trait::async_trait;
use boitata_core::OutputStream;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub mod docker;

/// Label holding the id of the run that provisioned a sandbox.
pub const LABEL_RUN_ID: &str = "boitata.run_id";
/// Label holding the id of the blueprint node that provisioned a sandbox.
pub const LABEL_NODE: &str = "boitata.node";
/// Label marking a sandbox as Boitata's; its value is [`CREATED_BY`].
pub const LABEL_CREATED_BY: &str = "boitata.created_by";
/// The value of [`LABEL_CREATED_BY`].
pub const CREATED_BY: &str = "boitata";
/// Label holding the process id of the Boitata process that provisioned a sandbox, so
/// the reaper can tell a run left `running` by a killed process from a live one.
pub const LABEL_PID: &str = "boitata.pid";
/// Label holding the start time (in clock ticks since boot, as `/proc/PID/stat`
/// gives it) of the process in [`LABEL_PID`], so that a reused pid is not taken for
/// the owner.
pub const LABEL_PID_START: &str = "boitata.pid_start";
/// Label holding the host name of the machine whose process provisioned a sandbox
/// ([`LABEL_PID`] only means something there).
pub const LABEL_HOST: &str = "boitata.host";

/// The address, in [`SandboxSpec::extra_hosts`], that stands for the host machine as
/// the sandbox's network reaches it (the bridge's gateway on Docker).
pub const HOST_GATEWAY: &str = "host-gateway";
/// The name a sandbox reaches the host by, as Docker Desktop names it too: on its run
/// network the network's gateway address ([`RunSandboxes`](crate::RunSandboxes) maps
/// it), on `bridge` [`HOST_GATEWAY`] (the `provision` node maps it).
pub const HOST_GATEWAY_NAME: &str = "host.docker.internal";

/// The working directory a sandbox starts in, and the default checkout destination.
pub const DEFAULT_WORKDIR: &str = "/workspace";
/// Default memory limit: 2 GiB (swap is not allowed beyond it).
pub const DEFAULT_MEMORY_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Default limit on the number of processes (and threads) in a sandbox.
pub const DEFAULT_PIDS_LIMIT: i64 = 512;
/// Default CPU limit, in CPUs (clamped to what the daemon's machine has).
pub const DEFAULT_CPUS: f64 = 2.0;
/// The environment variable every exec'd command carries, whose value identifies the
/// exec; a timed-out command's processes are found (and killed) by it.
pub const EXEC_MARKER_ENV: &str = "BOITATA_EXEC_ID";

/// A backend's id for a sandbox (a container id for Docker).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SandboxId(String);

impl SandboxId {
    /// Wraps a backend id.
    pub fn new(id: impl Into<String>) -> Self {
        SandboxId(id.into())
    }

    /// The id as the backend knows it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 characters, as `docker ps` shows container ids.
    pub fn short(&self) -> &str {
        self.0.get(..12).unwrap_or(&self.0)
    }
}

impl fmt::Display for SandboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for SandboxId {
    fn from(id: String) -> Self {
        SandboxId(id)
    }
}

/// A sandbox's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The run's own network (`boitata-run-RUN`, see [`run_network_name`]): internal
    /// (no route out), shared only by the run's sandboxes, with host rules that let
    /// them reach nothing on the host but the ports the run opens on the network's
    /// gateway address. It must exist before the sandbox is provisioned
    /// ([`Sandbox::create_run_network`]; [`RunSandboxes`](crate::RunSandboxes) makes
    /// it). [`SandboxSpec::ports`] are reached on the sandbox's own address there
    /// (nothing is published). The default.
    #[default]
    Run,
    /// No network at all: only a loopback interface; no port can be published.
    None,
    /// The daemon's default bridge: **not isolated** (other runs' sandboxes, host
    /// services and the internet can be reached), and [`SandboxSpec::ports`]
    /// published on the host's loopback (127.0.0.1) only. An explicit opt-out.
    Bridge,
}

impl Network {
    /// `run`, `none` or `bridge`.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Run => "run",
            Network::None => "none",
            Network::Bridge => "bridge",
        }
    }
}

/// The prefix of every run network's name.
pub const RUN_NETWORK_PREFIX: &str = "boitata-run-";

/// The name of run `run_id`'s own network: `boitata-run-RUN`.
pub fn run_network_name(run_id: &str) -> String {
    format!("{RUN_NETWORK_PREFIX}{run_id}")
}

/// The host interface (Linux bridge) of run `run_id`'s own network: `bt-` and 12 hex
/// digits of a hash of the run id (interface names have at most 15 characters).
/// Backends that can name the bridge name it so: a run's host rules (see
/// [`crate::network`]) then name an interface a person can trace to the run.
pub fn run_network_interface(run_id: &str) -> String {
    format!("bt-{:012x}", run_id_hash(run_id) >> 16)
}

/// A hash of a run id, for names derived from it that must be short (the bridge
/// interface, the host rules' chain). The same in every process of one build.
pub(crate) fn run_id_hash(run_id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    run_id.hash(&mut hasher);
    hasher.finish()
}

/// A run network as the backend reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunNetworkInfo {
    /// The backend's id (a Docker network id).
    pub id: String,
    /// Its name, `boitata-run-RUN`.
    pub name: String,
    /// The network's gateway address: the host's own address on the network, where
    /// the run's egress proxy and model gateway listen. `None` if the backend has none.
    pub gateway: Option<IpAddr>,
    /// The host's network interface the network is (a Linux bridge: `bt-…`, see [`run_network_interface`], when the backend
    /// names it so; Docker's own `br-…` otherwise), where
    /// host rules apply. `None` if the backend has none.
    pub interface: Option<String>,
    /// All its labels (the same `boitata.*` labels a sandbox carries).
    pub labels: BTreeMap<String, String>,
}

impl RunNetworkInfo {
    /// The [`LABEL_RUN_ID`] label.
    pub fn run_id(&self) -> Option<&str> {
        self.labels.get(LABEL_RUN_ID).map(String::as_str)
    }
}

/// What a sandbox on its run's network may reach beyond the run, besides the ports
/// the run opens on the gateway address. Applied by
/// [`RunSandboxes`](crate::RunSandboxes) (a backend alone ignores it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Egress {
    /// Nothing: no connection to the host at all (not even the model gateway); only
    /// the run's other sandboxes.
    None,
    /// The run's ports on the gateway address only (the model gateway). The default.
    #[default]
    Gateway,
    /// Also the destinations the policy allows, through the run's egress proxy
    /// (`HTTP_PROXY` and `HTTPS_PROXY` in the sandbox's environment).
    Allow(crate::egress::EgressPolicy),
}

/// Resource limits of a sandbox. The defaults are [`DEFAULT_CPUS`],
/// [`DEFAULT_MEMORY_BYTES`] and [`DEFAULT_PIDS_LIMIT`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU time, in CPUs (`1.5` = one and a half cores); Docker's `NanoCpus`.
    pub cpus: f64,
    /// Memory, in bytes; swap is limited to the same figure (no swap beyond it).
    pub memory_bytes: u64,
    /// Maximum number of processes and threads; Docker's `PidsLimit`.
    pub pids: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpus: DEFAULT_CPUS,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            pids: DEFAULT_PIDS_LIMIT,
        }
    }
}

/// Privilege settings of a sandbox. The default drops every capability and sets
/// `no-new-privileges`; a sandbox is never privileged and never gets the daemon's
/// socket, whatever these say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hardening {
    /// Capabilities given back after dropping all (`CHOWN`, `NET_BIND_SERVICE`, …).
    /// Empty by default.
    pub cap_add: Vec<String>,
    /// Whether processes are barred from gaining privileges (setuid binaries, file
    /// capabilities). True by default.
    pub no_new_privileges: bool,
}

impl Default for Hardening {
    fn default() -> Self {
        Hardening {
            cap_add: Vec::new(),
            no_new_privileges: true,
        }
    }
}

/// What to provision: an image plus the run's labels, limits and settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxSpec {
    /// The image to start (`boitata-base:bookworm`); never pulled: it must exist.
    pub image: String,
    /// The run this sandbox belongs to (the [`LABEL_RUN_ID`] label).
    pub run_id: String,
    /// The node that provisions it (the [`LABEL_NODE`] label), if any.
    pub node: Option<String>,
    /// The sandbox's own environment. Do not put secrets here: pass them to the `exec`
    /// that needs them.
    pub env: BTreeMap<String, String>,
    /// The working directory, created if missing. Default [`DEFAULT_WORKDIR`].
    pub workdir: String,
    /// The network. Default [`Network::Run`].
    pub network: Network,
    /// What the sandbox may reach beyond its run, on [`Network::Run`]. Default
    /// [`Egress::Gateway`].
    pub egress: Egress,
    /// TCP ports inside the sandbox the orchestrator reaches (see
    /// [`Sandbox::endpoint`]): on the sandbox's address on [`Network::Run`],
    /// published on an ephemeral port of the host's loopback on [`Network::Bridge`].
    pub ports: Vec<u16>,
    /// Resource limits.
    pub limits: Limits,
    /// Capabilities and privilege settings.
    pub hardening: Hardening,
    /// Extra labels; the `boitata.*` labels are set by the backend and win.
    pub labels: BTreeMap<String, String>,
    /// Extra host names the sandbox resolves (name → IP address). The address
    /// [`HOST_GATEWAY`] means the host as seen from the sandbox's network (Docker's
    /// `host-gateway`).
    pub extra_hosts: BTreeMap<String, String>,
}

impl SandboxSpec {
    /// A spec for `image` in run `run_id`, with every other setting at its default.
    pub fn new(image: impl Into<String>, run_id: impl Into<String>) -> Self {
        SandboxSpec {
            image: image.into(),
            run_id: run_id.into(),
            node: None,
            env: BTreeMap::new(),
            workdir: DEFAULT_WORKDIR.to_owned(),
            network: Network::default(),
            egress: Egress::default(),
            ports: Vec::new(),
            limits: Limits::default(),
            hardening: Hardening::default(),
            labels: BTreeMap::new(),
            extra_hosts: BTreeMap::new(),
        }
    }

    /// Sets the node label.
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// Sets the network.
    pub fn network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

    /// Adds a port to publish on the host's loopback.
    pub fn port(mut self, port: u16) -> Self {
        self.ports.push(port);
        self
    }

    /// Checks the settings that do not need a backend to judge.
    ///
    /// # Errors
    /// [`SandboxError::InvalidSpec`] naming the field and what to do.
    pub fn validate(&self) -> Result<(), SandboxError> {
        let invalid = |message: String| Err(SandboxError::InvalidSpec { message });
        if self.image.trim().is_empty() {
            return invalid(
                "image is empty: name a local image, e.g. boitata-base:bookworm".into(),
            );
        }
        if !self.workdir.starts_with('/') {
            return invalid(format!(
                "workdir {:?} is not absolute: use a path like /workspace",
                self.workdir
            ));
        }
        if self.network == Network::None && !self.ports.is_empty() {
            return invalid(format!(
                "ports {:?} cannot be reached with network none: use the run network",
                self.ports
            ));
        }
        if self.network != Network::Run && self.egress != Egress::Gateway {
            return invalid(format!(
                "egress applies to the run network, not to network {}",
                self.network.as_str()
            ));
        }
        if !(self.limits.cpus > 0.0 && self.limits.cpus.is_finite()) {
            return invalid(format!(
                "cpus {} must be a positive number",
                self.limits.cpus
            ));
        }
        if self.limits.memory_bytes < 6 * 1024 * 1024 {
            return invalid(format!(
                "memory {} bytes is below Docker's minimum of 6 MiB",
                self.limits.memory_bytes
            ));
        }
        if self.limits.pids < 1 {
            return invalid(format!("pids {} must be at least 1", self.limits.pids));
        }
        for key in self.env.keys() {
            if key.is_empty() || key.contains('=') {
                return invalid(format!("env name {key:?} is empty or contains '='"));
            }
        }
        for (name, address) in &self.extra_hosts {
            let name_ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
            if !name_ok {
                return invalid(format!(
                    "extra host name {name:?} is not a host name (letters, digits, '-', '.')"
                ));
            }
            if address != HOST_GATEWAY && address.parse::<std::net::IpAddr>().is_err() {
                return invalid(format!(
                    "extra host {name:?}: {address:?} is neither an IP address nor {HOST_GATEWAY}"
                ));
            }
        }
        Ok(())
    }
}

/// A command to run in a sandbox.
#[derive(Debug, Clone)]
pub struct ExecSpec {
    /// The program and its arguments, run directly (no shell; see [`ExecSpec::shell`]).
    pub argv: Vec<String>,
    /// The working directory; the sandbox's when `None`.
    pub workdir: Option<String>,
    /// Variables added to the sandbox's environment for this command only.
    pub env: BTreeMap<String, String>,
    /// How long the command may run; at the deadline every process it started is
    /// killed inside the sandbox and [`ExecStatus::TimedOut`] returned. No limit when
    /// `None`.
    pub timeout: Option<Duration>,
    /// Start the command and return at once ([`ExecStatus::Detached`]) instead of
    /// waiting: for daemons such as the in-sandbox agent. Its output is not streamed.
    pub detached: bool,
    /// Stops the command when fired: every process it started is killed inside the
    /// sandbox and [`ExecStatus::Cancelled`] returned.
    pub cancel: Option<CancellationToken>,
}

impl ExecSpec {
    /// Runs `argv` directly.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ExecSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            workdir: None,
            env: BTreeMap::new(),
            timeout: None,
            detached: false,
            cancel: None,
        }
    }

    /// Runs `script` with `sh -c`.
    pub fn shell(script: impl Into<String>) -> Self {
        ExecSpec::new(["sh".to_owned(), "-c".to_owned(), script.into()])
    }

    /// Sets the working directory.
    pub fn workdir(mut self, dir: impl Into<String>) -> Self {
        self.workdir = Some(dir.into());
        self
    }

    /// Adds one environment variable.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Makes the command detached.
    pub fn detached(mut self) -> Self {
        self.detached = true;
        self
    }

    /// Stops the command when `token` fires.
    pub fn cancel_on(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

/// How an exec ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecStatus {
    /// The command exited with this code (128 + N when killed by signal N).
    Exited(i64),
    /// The command ran past its timeout and was killed, with everything it started.
    TimedOut(Duration),
    /// The command's cancellation token fired and it was killed, with everything it
    /// started.
    Cancelled,
    /// The command was started detached and is still running.
    Detached,
}

impl ExecStatus {
    /// The exit code, when the command exited.
    pub fn code(self) -> Option<i64> {
        match self {
            ExecStatus::Exited(code) => Some(code),
            _ => None,
        }
    }

    /// True for exit code 0 and for a detached start.
    pub fn success(self) -> bool {
        matches!(self, ExecStatus::Exited(0) | ExecStatus::Detached)
    }
}

/// Receives a command's output as it arrives, in order. Chunks are raw bytes and may
/// split lines (and UTF-8 sequences) anywhere.
pub trait OutputSink: Send {
    /// Takes one chunk from `stream`.
    fn output(&mut self, stream: OutputStream, chunk: &[u8]);
}

impl<F> OutputSink for F
where
    F: FnMut(OutputStream, &[u8]) + Send,
{
    fn output(&mut self, stream: OutputStream, chunk: &[u8]) {
        self(stream, chunk)
    }
}

/// An [`OutputSink`] that keeps everything, stdout and stderr apart.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CollectOutput {
    /// Everything written to standard output.
    pub stdout: Vec<u8>,
    /// Everything written to standard error.
    pub stderr: Vec<u8>,
}

impl CollectOutput {
    /// Standard output as (lossy) UTF-8.
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Standard error as (lossy) UTF-8.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

impl OutputSink for CollectOutput {
    fn output(&mut self, stream: OutputStream, chunk: &[u8]) {
        match stream {
            OutputStream::Stdout => self.stdout.extend_from_slice(chunk),
            OutputStream::Stderr => self.stderr.extend_from_slice(chunk),
        }
    }
}

/// An [`OutputSink`] that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct DiscardOutput;

impl OutputSink for DiscardOutput {
    fn output(&mut self, _stream: OutputStream, _chunk: &[u8]) {}
}

/// A sandbox as [`Sandbox::list`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    /// The backend's id.
    pub id: SandboxId,
    /// A readable name (the container name for Docker).
    pub name: String,
    /// The image it runs.
    pub image: String,
    /// The backend's state word (`running`, `exited`, `created`, …).
    pub state: String,
    /// All its labels.
    pub labels: BTreeMap<String, String>,
}

impl SandboxInfo {
    /// The [`LABEL_RUN_ID`] label.
    pub fn run_id(&self) -> Option<&str> {
        self.labels.get(LABEL_RUN_ID).map(String::as_str)
    }

    /// The [`LABEL_NODE`] label.
    pub fn node(&self) -> Option<&str> {
        self.labels.get(LABEL_NODE).map(String::as_str)
    }

    /// The [`LABEL_PID`] label, parsed.
    pub fn pid(&self) -> Option<u32> {
        self.labels.get(LABEL_PID).and_then(|p| p.parse().ok())
    }

    /// The [`LABEL_HOST`] label.
    pub fn host(&self) -> Option<&str> {
        self.labels.get(LABEL_HOST).map(String::as_str)
    }
}

/// A sandbox operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The backend's daemon could not be reached (Docker: no socket, refused, wrong
    /// `DOCKER_HOST`).
    #[error(
        "cannot reach the Docker daemon at {host} ({reason}): start it \
         (e.g. `sudo service docker start`) or set DOCKER_HOST to a running daemon's socket"
    )]
    DaemonUnavailable {
        /// The address tried (`unix:///var/run/docker.sock`).
        host: String,
        /// What went wrong, from the client.
        reason: String,
    },
    /// The image does not exist locally (images are never pulled).
    #[error(
        "image {image:?} is not in the local Docker daemon and is never pulled: build it \
         (`scripts/build-base-image.sh` makes boitata-base:bookworm; \
         `docker build -f examples/boitata-agent-rust.Dockerfile -t boitata-agent-rust:latest .` \
         makes the agent image; with a registry, `docker pull` it) — see docs/sandboxing.md"
    )]
    ImageNotFound {
        /// The image reference.
        image: String,
    },
    /// No sandbox with this id exists (destroyed, or never made).
    #[error("sandbox {id} does not exist (it may have been destroyed)")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The port was not listed in [`SandboxSpec::ports`] when the sandbox was made.
    #[error("sandbox {id}: port {port}/tcp is not published; list it in the sandbox's ports")]
    PortNotPublished {
        /// The sandbox.
        id: String,
        /// The port inside the sandbox.
        port: u16,
    },
    /// The sandbox is on no network with a gateway to the host.
    #[error(
        "sandbox {id} is on no network with a gateway to the host, so it cannot reach \
         the model gateway: provision it with network: bridge"
    )]
    NoNetwork {
        /// The sandbox.
        id: String,
    },
    /// The spec was refused before reaching the backend.
    #[error("invalid sandbox spec: {message}")]
    InvalidSpec {
        /// What is wrong and what to do.
        message: String,
    },
    /// The backend cannot do this.
    #[error("the {backend} backend has no {feature}: use network bridge or none")]
    Unsupported {
        /// The backend.
        backend: &'static str,
        /// What it lacks.
        feature: &'static str,
    },
    /// The run's network could not be isolated (its host rules could not be set):
    /// no sandbox is started on an unfirewalled network.
    #[error("run {run_id}: {message}")]
    Isolation {
        /// The run.
        run_id: String,
        /// What failed and what to do.
        message: String,
    },
    /// The run's egress proxy could not start.
    #[error("run {run_id}: the egress proxy cannot listen on {address}: {source}")]
    EgressProxy {
        /// The run.
        run_id: String,
        /// The address tried.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The run is ending (teardown began): no new sandbox can be provisioned for it.
    #[error("run {run_id} is ending: no new sandbox can be provisioned")]
    RunEnded {
        /// The run.
        run_id: String,
    },
    /// The backend refused or failed an operation.
    #[error("{backend} {operation} failed: {source}")]
    Backend {
        /// The backend (`docker`).
        backend: &'static str,
        /// What was being done (`create container`, `start exec`, …).
        operation: &'static str,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A place to run a run's commands in isolation. See the module docs.
///
/// Implementations connect lazily: constructing one never touches a daemon, so code
/// paths that need no sandbox work without one.
#[async_trait]
pub trait Sandbox: Send + Sync {
    /// The backend's name (`docker`), as events and `sandbox list` show it.
    fn backend_name(&self) -> &'static str;

    /// Creates and starts a sandbox from `spec`, hardened per [`Hardening`] and
    /// [`Limits`], labelled per the module docs, running a keep-alive process under an
    /// init that reaps zombies.
    ///
    /// # Errors
    /// [`SandboxError::InvalidSpec`], [`SandboxError::ImageNotFound`],
    /// [`SandboxError::DaemonUnavailable`], [`SandboxError::Backend`]. A sandbox that
    /// was created but could not start is removed before the error is returned.
    async fn provision(&self, spec: &SandboxSpec) -> Result<SandboxId, SandboxError>;

    /// Runs `spec` in the sandbox with a closed stdin and no terminal, streaming its
    /// output to `sink`, and returns how it ended. At `spec.timeout`, or when
    /// `spec.cancel` fires, every process the command started (found by
    /// [`EXEC_MARKER_ENV`]) is killed inside the sandbox and output stops being read.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`], [`SandboxError::DaemonUnavailable`],
    /// [`SandboxError::Backend`] (e.g. the program does not exist).
    async fn exec(
        &self,
        id: &SandboxId,
        spec: &ExecSpec,
        sink: &mut dyn OutputSink,
    ) -> Result<ExecStatus, SandboxError>;

    /// Where the orchestrator reaches the sandbox's TCP `port`: the sandbox's own
    /// address on its run network ([`Network::Run`]), or the host loopback address the
    /// port is published on ([`Network::Bridge`]).
    ///
    /// # Errors
    /// [`SandboxError::PortNotPublished`] if the port was not in the spec's `ports`
    /// (or the sandbox has no network);
    /// [`SandboxError::NotFound`].
    async fn endpoint(&self, id: &SandboxId, port: u16) -> Result<SocketAddr, SandboxError>;

    /// The host's address on the sandbox's network (the network's gateway): where a
    /// service of the orchestrator on the host (the model gateway) is reachable from
    /// inside the sandbox.
    ///
    /// # Errors
    /// [`SandboxError::NoNetwork`] when the sandbox has no network with a gateway
    /// (`network: none`); [`SandboxError::NotFound`]; [`SandboxError::Backend`].
    async fn gateway_address(&self, id: &SandboxId) -> Result<IpAddr, SandboxError> {
        Err(SandboxError::NoNetwork { id: id.to_string() })
    }

    /// Unpacks the tar archive `tar` under the directory `dest` inside the sandbox,
    /// creating `dest` if needed.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`], [`SandboxError::Backend`].
    async fn upload(&self, id: &SandboxId, tar: Vec<u8>, dest: &str) -> Result<(), SandboxError>;

    /// Stops and removes the sandbox and its anonymous volumes. Destroying a sandbox
    /// that no longer exists succeeds.
    ///
    /// # Errors
    /// [`SandboxError::DaemonUnavailable`], [`SandboxError::Backend`].
    async fn destroy(&self, id: &SandboxId) -> Result<(), SandboxError>;

    /// Every sandbox made by Boitata ([`LABEL_CREATED_BY`]) that has all the `labels`
    /// given (name → value), running or not.
    ///
    /// # Errors
    /// [`SandboxError::DaemonUnavailable`], [`SandboxError::Backend`].
    async fn list(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<SandboxInfo>, SandboxError>;

    /// Creates run `run_id`'s own network ([`run_network_name`]): internal (no route
    /// out), labelled like the run's sandboxes. Host rules are not the backend's job
    /// (see [`crate::network`]).
    ///
    /// # Errors
    /// [`SandboxError::Unsupported`] for a backend without networks;
    /// [`SandboxError::DaemonUnavailable`], [`SandboxError::Backend`].
    async fn create_run_network(&self, run_id: &str) -> Result<RunNetworkInfo, SandboxError> {
        let _ = run_id;
        Err(SandboxError::Unsupported {
            backend: self.backend_name(),
            feature: "run networks",
        })
    }

    /// Removes the network named `name` (a sandbox still on it is disconnected first).
    /// Removing a network that no longer exists succeeds.
    ///
    /// # Errors
    /// [`SandboxError::Unsupported`], [`SandboxError::DaemonUnavailable`],
    /// [`SandboxError::Backend`].
    async fn remove_run_network(&self, name: &str) -> Result<(), SandboxError> {
        let _ = name;
        Err(SandboxError::Unsupported {
            backend: self.backend_name(),
            feature: "run networks",
        })
    }

    /// The sandbox's address on its run network, or `None` when it is on no run
    /// network.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`], [`SandboxError::DaemonUnavailable`],
    /// [`SandboxError::Backend`].
    async fn run_network_address(&self, id: &SandboxId) -> Result<Option<IpAddr>, SandboxError> {
        let _ = id;
        Ok(None)
    }

    /// Every run network made by Boitata ([`LABEL_CREATED_BY`]).
    ///
    /// # Errors
    /// [`SandboxError::DaemonUnavailable`], [`SandboxError::Backend`]. A backend
    /// without networks returns an empty list.
    async fn list_run_networks(&self) -> Result<Vec<RunNetworkInfo>, SandboxError> {
        Ok(Vec::new())
    }
}
