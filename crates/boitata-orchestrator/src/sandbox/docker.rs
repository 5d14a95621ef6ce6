//! The Docker backend: a [`Sandbox`] is a container, driven through the Docker Engine
//! API with `bollard`.
//!
//! - **Connection**: lazy. [`DockerBackend::from_env`] only reads `DOCKER_HOST`
//!   (default `unix:///var/run/docker.sock`); the first operation connects and
//!   negotiates the API version (`GET /version`), so a daemon speaking an older API
//!   (Debian's 20.10 engine speaks 1.41) is addressed in its own version.
//! - **Containers**: `POST /containers/create` with the image's entrypoint replaced by
//!   `sleep infinity` under Docker's init (`HostConfig.Init`), all capabilities dropped
//!   (`CapDrop: ["ALL"]`), `SecurityOpt: ["no-new-privileges"]`, `PidsLimit`, `Memory`
//!   (= `MemorySwap`), `NanoCpus`, `Privileged: false`, no mounts at all, ports
//!   published on `127.0.0.1` only, and `ExtraHosts` (`host-gateway` needs Docker
//!   20.10 or later).
//! - **Exec**: `POST /containers/{id}/exec` + `/exec/{id}/start` (attached, no TTY, no
//!   stdin), exit code from `GET /exec/{id}/json`. Each exec carries
//!   [`EXEC_MARKER_ENV`]; at a timeout or cancellation a second exec kills every
//!   process in the container whose environment holds that marker, so children that
//!   left the process group (`setsid`) are found too.
//! - **Upload**: `PUT /containers/{id}/archive` (a tar stream); never a bind mount.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use async_trait::async_trait;
use boitata_core::OutputStream;
use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, HostConfig, NetworkCreateRequest, NetworkDisconnectRequest, PortBinding,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, InspectNetworkOptions, ListContainersOptions,
    ListNetworksOptions, RemoveContainerOptions, UploadToContainerOptions,
};
use bollard::Docker;
use futures::StreamExt;
use tokio::sync::OnceCell;

use super::{
    run_network_interface, run_network_name, ExecSpec, ExecStatus, Network, OutputSink,
    RunNetworkInfo, Sandbox, SandboxError, SandboxId, SandboxInfo, SandboxSpec, CREATED_BY,
    EXEC_MARKER_ENV, LABEL_CREATED_BY, LABEL_HOST, LABEL_NODE, LABEL_PID, LABEL_PID_START,
    LABEL_RUN_ID, RUN_NETWORK_PREFIX,
};

/// The network option naming a bridge network's Linux interface.
const BRIDGE_NAME_OPTION: &str = "com.docker.network.bridge.name";

/// Where the Docker daemon is when `DOCKER_HOST` is unset.
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";

/// How long connecting and negotiating the API version may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the kill of a timed-out command may take.
const KILL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long to wait for an exec to be reported finished after its output ended.
const EXIT_CODE_WAIT: Duration = Duration::from_secs(10);

const BACKEND: &str = "docker";

/// Kills every process whose environment holds `EXEC_MARKER_ENV=$1`, repeating until
/// none is left (a process may fork while the loop runs). Needs `sh`, `tr`, `grep`
/// and `kill` in the image.
const KILL_SCRIPT: &str = r#"marker="BOITATA_EXEC_ID=$1"
round=0
while [ $round -lt 20 ]; do
  found=0
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$pid" = "$$" ] && continue
    if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "$marker"; then
      kill -9 "$pid" 2>/dev/null && found=1
    fi
  done
  [ $found = 0 ] && exit 0
  round=$((round + 1))
done
exit 1
"#;

/// The Docker backend. Cheap to share (`Arc`); connects on first use.
#[derive(Debug)]
pub struct DockerBackend {
    host: String,
    client: OnceCell<Docker>,
    host_cpus: OnceCell<Option<f64>>,
    owner_pid: u32,
    owner_start: Option<u64>,
    owner_scope: String,
}

impl DockerBackend {
    /// A backend for the daemon `DOCKER_HOST` names (or [`DEFAULT_DOCKER_HOST`]).
    /// Does not connect.
    pub fn from_env() -> Self {
        let host = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_owned());
        DockerBackend::with_host(host)
    }

    /// A backend for the daemon at `host` (`unix:///path`, `tcp://host:port`,
    /// `http://…`). Does not connect.
    pub fn with_host(host: impl Into<String>) -> Self {
        DockerBackend {
            host: host.into(),
            client: OnceCell::new(),
            host_cpus: OnceCell::new(),
            owner_pid: std::process::id(),
            owner_start: boitata_tools::process::start_time(std::process::id()),
            owner_scope: boitata_tools::process::owner_scope(),
        }
    }

    /// The daemon address this backend uses.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Connects (once) and checks that the daemon answers, negotiating the API version.
    ///
    /// # Errors
    /// [`SandboxError::DaemonUnavailable`] with the address and the cause.
    pub async fn connect(&self) -> Result<(), SandboxError> {
        self.client().await.map(|_| ())
    }

    async fn client(&self) -> Result<&Docker, SandboxError> {
        self.client
            .get_or_try_init(|| async {
                let unavailable = |reason: String| SandboxError::DaemonUnavailable {
                    host: self.host.clone(),
                    reason,
                };
                let docker = Docker::connect_with_host(&self.host)
                    .map_err(|e| unavailable(short_reason(&e)))?;
                let negotiated = tokio::time::timeout(CONNECT_TIMEOUT, docker.negotiate_version())
                    .await
                    .map_err(|_| unavailable(format!("no answer in {CONNECT_TIMEOUT:?}")))?
                    .map_err(|e| unavailable(short_reason(&e)))?;
                tracing::debug!(
                    host = %self.host,
                    api = %negotiated.client_version(),
                    "connected to the Docker daemon"
                );
                Ok(negotiated)
            })
            .await
    }

    /// The number of CPUs of the daemon's machine, asked once.
    async fn host_cpus(&self, docker: &Docker) -> Option<f64> {
        *self
            .host_cpus
            .get_or_init(|| async {
                match docker.info().await {
                    Ok(info) => info.ncpu.map(|n| n as f64),
                    Err(e) => {
                        tracing::debug!("docker info failed, CPU limit not clamped: {e}");
                        None
                    }
                }
            })
            .await
    }

    fn labels_for(&self, spec: &SandboxSpec) -> HashMap<String, String> {
        let mut labels: HashMap<String, String> = spec
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        labels.extend(self.owner_labels(&spec.run_id));
        if let Some(node) = &spec.node {
            labels.insert(LABEL_NODE.into(), node.clone());
        }
        labels
    }

    /// The labels of everything made for run `run_id`: who made it, for which run.
    fn owner_labels(&self, run_id: &str) -> HashMap<String, String> {
        let mut labels = HashMap::new();
        labels.insert(LABEL_CREATED_BY.into(), CREATED_BY.into());
        labels.insert(LABEL_RUN_ID.into(), run_id.to_owned());
        labels.insert(LABEL_PID.into(), self.owner_pid.to_string());
        if let Some(start) = self.owner_start {
            labels.insert(LABEL_PID_START.into(), start.to_string());
        }
        labels.insert(LABEL_HOST.into(), self.owner_scope.clone());
        labels
    }

    /// Kills, inside the container, every process of the exec marked `marker`.
    async fn kill_marked(&self, docker: &Docker, id: &SandboxId, marker: &str) {
        let kill = async {
            let exec = docker
                .create_exec(
                    id.as_str(),
                    CreateExecOptions::<String> {
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        cmd: Some(vec![
                            "sh".into(),
                            "-c".into(),
                            KILL_SCRIPT.into(),
                            "boitata-kill".into(),
                            marker.into(),
                        ]),
                        ..Default::default()
                    },
                )
                .await?;
            if let StartExecResults::Attached { mut output, .. } =
                docker.start_exec(&exec.id, None).await?
            {
                while let Some(item) = output.next().await {
                    item?;
                }
            }
            Ok::<_, BollardError>(())
        };
        match tokio::time::timeout(KILL_TIMEOUT, kill).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(sandbox = %id.short(), "killing a timed-out command failed: {e}")
            }
            Err(_) => {
                tracing::warn!(sandbox = %id.short(), "killing a timed-out command took over {KILL_TIMEOUT:?}")
            }
        }
    }

    async fn exit_code(&self, docker: &Docker, exec_id: &str) -> Result<i64, SandboxError> {
        let deadline = tokio::time::Instant::now() + EXIT_CODE_WAIT;
        let mut pause = Duration::from_millis(2);
        loop {
            let inspect = docker
                .inspect_exec(exec_id)
                .await
                .map_err(|e| self.error("inspect exec", e))?;
            if inspect.running != Some(true) {
                if let Some(code) = inspect.exit_code {
                    return Ok(code);
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(SandboxError::Backend {
                    backend: BACKEND,
                    operation: "inspect exec",
                    source: format!(
                        "the command's output ended but it was still running after {EXIT_CODE_WAIT:?}"
                    )
                    .into(),
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// Maps a client error: lost connections become [`SandboxError::DaemonUnavailable`].
    fn error(&self, operation: &'static str, e: BollardError) -> SandboxError {
        match e {
            BollardError::SocketNotFoundError(_)
            | BollardError::HyperLegacyError { .. }
            | BollardError::IOError { .. } => SandboxError::DaemonUnavailable {
                host: self.host.clone(),
                reason: short_reason(&e),
            },
            other => SandboxError::Backend {
                backend: BACKEND,
                operation,
                source: Box::new(other),
            },
        }
    }

    /// Like [`DockerBackend::error`], with a 404 meaning the container is gone.
    fn container_error(
        &self,
        operation: &'static str,
        id: &SandboxId,
        e: BollardError,
    ) -> SandboxError {
        if status_code(&e) == Some(404) {
            SandboxError::NotFound { id: id.to_string() }
        } else {
            self.error(operation, e)
        }
    }
}

impl Default for DockerBackend {
    fn default() -> Self {
        DockerBackend::from_env()
    }
}

#[async_trait]
impl Sandbox for DockerBackend {
    fn backend_name(&self) -> &'static str {
        BACKEND
    }

    async fn provision(&self, spec: &SandboxSpec) -> Result<SandboxId, SandboxError> {
        spec.validate()?;
        let docker = self.client().await?;

        let mut cpus = spec.limits.cpus;
        if let Some(available) = self.host_cpus(docker).await {
            if cpus > available {
                tracing::debug!("cpu limit {cpus} clamped to the daemon's {available} CPUs");
                cpus = available;
            }
        }
        let memory = i64::try_from(spec.limits.memory_bytes).unwrap_or(i64::MAX);

        let mut security_opt = Vec::new();
        if spec.hardening.no_new_privileges {
            security_opt.push("no-new-privileges".to_owned());
        }
        let (exposed_ports, port_bindings) = if spec.ports.is_empty() {
            (None, None)
        } else if spec.network == Network::Run {
            // Reached on the sandbox's own address on the run network: nothing published.
            let keys: Vec<String> = spec.ports.iter().map(|p| format!("{p}/tcp")).collect();
            (Some(keys), None)
        } else {
            let keys: Vec<String> = spec.ports.iter().map(|p| format!("{p}/tcp")).collect();
            let bindings = keys
                .iter()
                .map(|key| {
                    (
                        key.clone(),
                        Some(vec![PortBinding {
                            host_ip: Some(Ipv4Addr::LOCALHOST.to_string()),
                            host_port: Some(String::new()),
                        }]),
                    )
                })
                .collect();
            (Some(keys), Some(bindings))
        };

        let host_config = HostConfig {
            cap_drop: Some(vec!["ALL".into()]),
            cap_add: (!spec.hardening.cap_add.is_empty()).then(|| spec.hardening.cap_add.clone()),
            security_opt: (!security_opt.is_empty()).then_some(security_opt),
            privileged: Some(false),
            init: Some(true),
            pids_limit: Some(spec.limits.pids),
            memory: Some(memory),
            memory_swap: Some(memory),
            nano_cpus: Some((cpus * 1e9).round() as i64),
            network_mode: Some(match spec.network {
                Network::Run => run_network_name(&spec.run_id),
                other => other.as_str().into(),
            }),
            port_bindings,
            publish_all_ports: Some(false),
            auto_remove: Some(false),
            extra_hosts: (!spec.extra_hosts.is_empty()).then(|| {
                spec.extra_hosts
                    .iter()
                    .map(|(name, address)| format!("{name}:{address}"))
                    .collect()
            }),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            entrypoint: Some(vec!["sleep".into()]),
            cmd: Some(vec!["infinity".into()]),
            env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            working_dir: Some(spec.workdir.clone()),
            labels: Some(self.labels_for(spec)),
            exposed_ports,
            network_disabled: Some(spec.network == Network::None),
            attach_stdin: Some(false),
            attach_stdout: Some(false),
            attach_stderr: Some(false),
            open_stdin: Some(false),
            tty: Some(false),
            host_config: Some(host_config),
            ..Default::default()
        };
        let name = container_name(spec);
        let created = docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(name),
                    ..Default::default()
                }),
                body,
            )
            .await
            .map_err(|e| {
                if let Some(missing) = missing_run_network(spec, &e) {
                    missing
                } else if status_code(&e) == Some(404) {
                    SandboxError::ImageNotFound {
                        image: spec.image.clone(),
                    }
                } else {
                    self.error("create container", e)
                }
            })?;
        let id = SandboxId::new(created.id);
        for warning in &created.warnings {
            tracing::warn!(sandbox = %id.short(), "docker: {warning}");
        }
        if let Err(e) = docker.start_container(id.as_str(), None).await {
            let err =
                missing_run_network(spec, &e).unwrap_or_else(|| self.error("start container", e));
            if let Err(cleanup) = self.destroy(&id).await {
                tracing::warn!(sandbox = %id.short(), "removing a container that failed to start: {cleanup}");
            }
            return Err(err);
        }
        tracing::debug!(sandbox = %id.short(), image = %spec.image, "sandbox provisioned");
        Ok(id)
    }

    async fn exec(
        &self,
        id: &SandboxId,
        spec: &ExecSpec,
        sink: &mut dyn OutputSink,
    ) -> Result<ExecStatus, SandboxError> {
        if spec.argv.is_empty() {
            return Err(SandboxError::InvalidSpec {
                message: "exec: the command is empty".into(),
            });
        }
        let docker = self.client().await?;
        let marker = uuid::Uuid::now_v7().simple().to_string();
        let mut env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        env.push(format!("{EXEC_MARKER_ENV}={marker}"));
        let attach = !spec.detached;
        let exec = docker
            .create_exec(
                id.as_str(),
                CreateExecOptions::<String> {
                    attach_stdin: Some(false),
                    attach_stdout: Some(attach),
                    attach_stderr: Some(attach),
                    tty: Some(false),
                    env: Some(env),
                    cmd: Some(spec.argv.clone()),
                    working_dir: spec.workdir.clone(),
                    privileged: Some(false),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| self.container_error("create exec", id, e))?;

        if spec.detached {
            docker
                .start_exec(
                    &exec.id,
                    Some(bollard::exec::StartExecOptions {
                        detach: true,
                        ..Default::default()
                    }),
                )
                .await
                .map_err(|e| self.container_error("start exec", id, e))?;
            return Ok(ExecStatus::Detached);
        }

        let started = docker
            .start_exec(&exec.id, None)
            .await
            .map_err(|e| self.container_error("start exec", id, e))?;
        let StartExecResults::Attached { mut output, input } = started else {
            return Err(SandboxError::Backend {
                backend: BACKEND,
                operation: "start exec",
                source: "the daemon started an attached exec detached".into(),
            });
        };
        // Stdin was not attached; the write half is only kept so the connection stays
        // whole until the output ends.
        let _input = input;
        let pump = async {
            while let Some(item) = output.next().await {
                match item {
                    Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                        sink.output(OutputStream::Stdout, &message)
                    }
                    Ok(LogOutput::StdErr { message }) => {
                        sink.output(OutputStream::Stderr, &message)
                    }
                    Ok(LogOutput::StdIn { .. }) => {}
                    Err(e) => return Err(self.error("read exec output", e)),
                }
            }
            Ok(())
        };
        let deadline = async {
            match spec.timeout {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = async {
            match &spec.cancel {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let stopped = tokio::select! {
            pumped = pump => {
                pumped?;
                None
            }
            () = deadline => Some(ExecStatus::TimedOut(spec.timeout.unwrap_or_default())),
            () = cancelled => Some(ExecStatus::Cancelled),
        };
        if let Some(status) = stopped {
            tracing::debug!(sandbox = %id.short(), "exec stopped ({status:?}); killing its processes");
            self.kill_marked(docker, id, &marker).await;
            return Ok(status);
        }
        Ok(ExecStatus::Exited(self.exit_code(docker, &exec.id).await?))
    }

    async fn endpoint(&self, id: &SandboxId, port: u16) -> Result<SocketAddr, SandboxError> {
        let docker = self.client().await?;
        let inspect = docker
            .inspect_container(id.as_str(), None::<InspectContainerOptions>)
            .await
            .map_err(|e| self.container_error("inspect container", id, e))?;
        let key = format!("{port}/tcp");
        let exposed = inspect
            .config
            .as_ref()
            .and_then(|c| c.exposed_ports.as_ref())
            .is_some_and(|ports| ports.contains(&key));
        let run_address = run_network_address(&inspect);
        if let Some(address) = run_address {
            // On the run network: the orchestrator reaches the sandbox's own address.
            return if exposed {
                Ok(SocketAddr::new(address, port))
            } else {
                Err(SandboxError::PortNotPublished {
                    id: id.to_string(),
                    port,
                })
            };
        }
        let binding = inspect
            .network_settings
            .and_then(|n| n.ports)
            .and_then(|mut ports| ports.remove(&key))
            .flatten()
            .and_then(|bindings| {
                bindings.into_iter().find_map(|b| {
                    let host_port: u16 = b.host_port?.parse().ok()?;
                    let ip: IpAddr = b
                        .host_ip
                        .filter(|ip| !ip.is_empty())
                        .and_then(|ip| ip.parse().ok())
                        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
                    Some(SocketAddr::new(ip, host_port))
                })
            });
        binding.ok_or(SandboxError::PortNotPublished {
            id: id.to_string(),
            port,
        })
    }

    async fn gateway_address(&self, id: &SandboxId) -> Result<IpAddr, SandboxError> {
        let docker = self.client().await?;
        let inspect = docker
            .inspect_container(id.as_str(), None::<InspectContainerOptions>)
            .await
            .map_err(|e| self.container_error("inspect container", id, e))?;
        inspect
            .network_settings
            .and_then(|n| n.networks)
            .into_iter()
            .flat_map(|networks| networks.into_values())
            .find_map(|network| network.gateway?.parse::<IpAddr>().ok())
            .ok_or_else(|| SandboxError::NoNetwork { id: id.to_string() })
    }

    async fn upload(&self, id: &SandboxId, tar: Vec<u8>, dest: &str) -> Result<(), SandboxError> {
        if !dest.starts_with('/') {
            return Err(SandboxError::InvalidSpec {
                message: format!("upload destination {dest:?} is not an absolute path"),
            });
        }
        let docker = self.client().await?;
        let body = bytes::Bytes::from(tar);
        let options = || UploadToContainerOptions {
            path: dest.to_owned(),
            ..Default::default()
        };
        match docker
            .upload_to_container(
                id.as_str(),
                Some(options()),
                bollard::body_full(body.clone()),
            )
            .await
        {
            Ok(()) => return Ok(()),
            Err(e) if status_code(&e) == Some(404) => {
                // Either the container or `dest` is missing: make `dest` and try again
                // (the mkdir reports a missing container as NotFound).
                tracing::debug!(sandbox = %id.short(), "creating upload destination {dest}");
            }
            Err(e) => return Err(self.error("upload archive", e)),
        }
        let mut sink = super::CollectOutput::default();
        let status = self
            .exec(id, &ExecSpec::new(["mkdir", "-p", "--", dest]), &mut sink)
            .await?;
        if status != ExecStatus::Exited(0) {
            return Err(SandboxError::Backend {
                backend: BACKEND,
                operation: "upload archive",
                source: format!("cannot create {dest}: {}", sink.stderr_text().trim()).into(),
            });
        }
        docker
            .upload_to_container(id.as_str(), Some(options()), bollard::body_full(body))
            .await
            .map_err(|e| self.container_error("upload archive", id, e))
    }

    async fn destroy(&self, id: &SandboxId) -> Result<(), SandboxError> {
        let docker = self.client().await?;
        match docker
            .remove_container(
                id.as_str(),
                Some(RemoveContainerOptions {
                    force: true,
                    v: true,
                    ..Default::default()
                }),
            )
            .await
        {
            Ok(()) => {
                tracing::debug!(sandbox = %id.short(), "sandbox destroyed");
                Ok(())
            }
            // Gone already, or being removed by someone else: destroyed either way.
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
            Err(e) => Err(self.error("remove container", e)),
        }
    }

    async fn list(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<SandboxInfo>, SandboxError> {
        let docker = self.client().await?;
        let mut filters: Vec<String> = vec![format!("{LABEL_CREATED_BY}={CREATED_BY}")];
        filters.extend(labels.iter().map(|(k, v)| format!("{k}={v}")));
        let containers = docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: Some(HashMap::from([("label".to_owned(), filters)])),
                ..Default::default()
            }))
            .await
            .map_err(|e| self.error("list containers", e))?;
        Ok(containers
            .into_iter()
            .filter_map(|c| {
                Some(SandboxInfo {
                    id: SandboxId::new(c.id?),
                    name: c
                        .names
                        .and_then(|n| n.into_iter().next())
                        .map(|n| n.trim_start_matches('/').to_owned())
                        .unwrap_or_default(),
                    image: c.image.unwrap_or_default(),
                    state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                    labels: c.labels.unwrap_or_default().into_iter().collect(),
                })
            })
            .collect())
    }

    async fn create_run_network(&self, run_id: &str) -> Result<RunNetworkInfo, SandboxError> {
        let docker = self.client().await?;
        let name = run_network_name(run_id);
        let created = docker
            .create_network(NetworkCreateRequest {
                name: name.clone(),
                driver: Some("bridge".into()),
                internal: Some(true),
                attachable: Some(false),
                enable_ipv6: Some(false),
                labels: Some(self.owner_labels(run_id)),
                // A bridge name derived from the run, which its host rules name.
                options: Some(HashMap::from([(
                    BRIDGE_NAME_OPTION.to_owned(),
                    run_network_interface(run_id),
                )])),
                ..Default::default()
            })
            .await
            .map_err(|e| self.error("create network", e))?;
        if !created.warning.is_empty() {
            tracing::warn!(network = %name, "docker: {}", created.warning);
        }
        let info = self.run_network_info(docker, &created.id).await;
        if info.is_err() {
            if let Err(e) = docker.remove_network(&created.id).await {
                tracing::warn!(network = %name, "removing a network that could not be read: {e}");
            }
        }
        info
    }

    async fn remove_run_network(&self, name: &str) -> Result<(), SandboxError> {
        let docker = self.client().await?;
        // Usually its sandboxes are gone already: one call.
        match docker.remove_network(name).await {
            Ok(()) => return Ok(()),
            Err(e) if status_code(&e) == Some(404) => return Ok(()),
            Err(e) => {
                tracing::debug!(network = %name, "removing the network: {e}; disconnecting what is on it")
            }
        }
        let inspect = match docker
            .inspect_network(name, None::<InspectNetworkOptions>)
            .await
        {
            Ok(inspect) => inspect,
            Err(e) if status_code(&e) == Some(404) => return Ok(()),
            Err(e) => return Err(self.error("inspect network", e)),
        };
        for container in inspect.containers.unwrap_or_default().into_keys() {
            let disconnect = docker
                .disconnect_network(
                    name,
                    NetworkDisconnectRequest {
                        container,
                        force: Some(true),
                    },
                )
                .await;
            if let Err(e) = disconnect {
                if !matches!(status_code(&e), Some(404)) {
                    tracing::debug!(network = %name, "disconnecting a container: {e}");
                }
            }
        }
        match docker.remove_network(name).await {
            Ok(()) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(self.error("remove network", e)),
        }
    }

    async fn run_network_address(&self, id: &SandboxId) -> Result<Option<IpAddr>, SandboxError> {
        let docker = self.client().await?;
        let inspect = docker
            .inspect_container(id.as_str(), None::<InspectContainerOptions>)
            .await
            .map_err(|e| self.container_error("inspect container", id, e))?;
        Ok(run_network_address(&inspect))
    }

    async fn list_run_networks(&self) -> Result<Vec<RunNetworkInfo>, SandboxError> {
        let docker = self.client().await?;
        let networks = docker
            .list_networks(Some(ListNetworksOptions {
                filters: Some(HashMap::from([(
                    "label".to_owned(),
                    vec![format!("{LABEL_CREATED_BY}={CREATED_BY}")],
                )])),
            }))
            .await
            .map_err(|e| self.error("list networks", e))?;
        let mut found = Vec::new();
        for network in networks {
            let Some(name) = network.name else { continue };
            if !name.starts_with(RUN_NETWORK_PREFIX) {
                continue;
            }
            match self.run_network_info(docker, &name).await {
                Ok(info) => found.push(info),
                // Removed between the list and the inspect: gone is fine.
                Err(SandboxError::Backend { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(found)
    }
}

impl DockerBackend {
    /// Reads a run network's record from the daemon.
    async fn run_network_info(
        &self,
        docker: &Docker,
        name: &str,
    ) -> Result<RunNetworkInfo, SandboxError> {
        let inspect = docker
            .inspect_network(name, None::<InspectNetworkOptions>)
            .await
            .map_err(|e| self.error("inspect network", e))?;
        let id = inspect.id.unwrap_or_default();
        let gateway = inspect
            .ipam
            .and_then(|ipam| ipam.config)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|config| config.gateway?.parse::<IpAddr>().ok())
            .find(IpAddr::is_ipv4);
        let interface = inspect
            .options
            .as_ref()
            .and_then(|o| o.get(BRIDGE_NAME_OPTION).cloned())
            .or_else(|| id.get(..12).map(|short| format!("br-{short}")));
        Ok(RunNetworkInfo {
            id,
            name: inspect.name.unwrap_or_else(|| name.to_owned()),
            gateway,
            interface,
            labels: inspect.labels.unwrap_or_default().into_iter().collect(),
        })
    }
}

/// A container's address on the run network it is on, if any.
fn run_network_address(inspect: &bollard::models::ContainerInspectResponse) -> Option<IpAddr> {
    inspect
        .network_settings
        .as_ref()
        .and_then(|n| n.networks.as_ref())
        .and_then(|networks| {
            networks
                .iter()
                .find(|(name, _)| name.starts_with(RUN_NETWORK_PREFIX))
                .and_then(|(_, endpoint)| endpoint.ip_address.as_deref()?.parse::<IpAddr>().ok())
        })
}

/// The error for a sandbox on [`Network::Run`] whose run network does not exist, when
/// the daemon's answer `e` (to creating or starting it) says so.
fn missing_run_network(spec: &SandboxSpec, e: &BollardError) -> Option<SandboxError> {
    let BollardError::DockerResponseServerError {
        status_code: 404,
        message,
    } = e
    else {
        return None;
    };
    if spec.network != Network::Run || !message.contains("network") {
        return None;
    }
    Some(SandboxError::Backend {
        backend: BACKEND,
        operation: "provision",
        source: format!(
            "network {} does not exist: provision through the run's tracker \
             (RunSandboxes), which creates it, or choose network bridge or none",
            run_network_name(&spec.run_id)
        )
        .into(),
    })
}

/// A readable, unique container name: `boitata-NODE-RANDOM`.
fn container_name(spec: &SandboxSpec) -> String {
    let node: String = spec
        .node
        .as_deref()
        .unwrap_or("sandbox")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let unique = uuid::Uuid::now_v7().simple().to_string();
    // The tail of a v7 uuid is random; its head is a timestamp shared by neighbours.
    format!("boitata-{node}-{}", &unique[unique.len() - 12..])
}

/// The HTTP status of a daemon's error answer.
fn status_code(e: &BollardError) -> Option<u16> {
    match e {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// The error and its causes on one line.
fn short_reason(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text.replace('\n', " ")
}
