//! Per-run sandbox tracking with guaranteed teardown.
//!
//! [`RunSandboxes`] provisions a run's sandboxes and remembers them; its
//! [`teardown`](RunSandboxes::teardown) destroys all of them, whatever the way the run
//! ended. Provisioning runs in its own task, so a node cancelled (or panicking) in the
//! middle of a provision cannot leave behind a container nobody knows about: teardown
//! waits for provisions in flight, then destroys what they made, then every sandbox
//! still labelled with the run's id.
//!
//! A sandbox on [`Network::Run`] joins the run's own [`RunNetwork`], made before the
//! first such provision and removed (with its host rules) at teardown, after the
//! sandboxes. Its [`Egress`] is applied here: `allow` starts an [`EgressProxy`] on the
//! network's gateway address and points the sandbox's proxy variables at it; `none`
//! closes the host to the sandbox.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use boitata_core::{Emitter, EventPayload};
use tokio::sync::OnceCell;
use tokio_util::task::TaskTracker;

use crate::egress::EgressProxy;
use crate::network::RunNetwork;
use crate::sandbox::{
    Egress, Network, Sandbox, SandboxError, SandboxId, SandboxSpec, HOST_GATEWAY_NAME, LABEL_RUN_ID,
};

/// The proxy variables set in a sandbox with `egress: allow` (both spellings: tools
/// read one or the other).
const PROXY_VARIABLES: [&str; 4] = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];

/// The sandboxes of one run. Cheap to clone; clones share the record.
#[derive(Clone)]
pub struct RunSandboxes {
    backend: Arc<dyn Sandbox>,
    run_id: String,
    emitter: Emitter,
    state: Arc<Mutex<TrackState>>,
    in_flight: TaskTracker,
    network: Arc<OnceCell<Arc<RunNetwork>>>,
}

#[derive(Default)]
struct TrackState {
    /// Provisioned and not yet destroyed, with the node that asked.
    live: Vec<(SandboxId, Option<String>)>,
    /// Set by teardown: later provisions are refused.
    ended: bool,
    /// Whether a provision was ever asked for (if not, teardown never touches the
    /// backend: a run without sandboxes works without a daemon).
    attempted: bool,
    /// The egress proxies of the run's sandboxes, stopped at teardown.
    proxies: Vec<EgressProxy>,
}

impl std::fmt::Debug for RunSandboxes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSandboxes")
            .field("backend", &self.backend.backend_name())
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// What [`RunSandboxes::teardown`] did.
#[derive(Debug, Default)]
pub struct TeardownReport {
    /// Sandboxes destroyed.
    pub destroyed: Vec<SandboxId>,
    /// Sandboxes that could not be destroyed (the reaper will find them), with why.
    pub failed: Vec<(SandboxId, SandboxError)>,
    /// The run network removed, with its host rules, if the run had one.
    pub network_removed: Option<String>,
    /// Why the run network (or its host rules) could not be removed (the reaper will).
    pub network_failed: Option<SandboxError>,
}

impl RunSandboxes {
    /// Tracks the sandboxes of run `emitter.run_id()` on `backend`; events
    /// (`sandbox_provisioned`, `sandbox_destroyed`) go to `emitter`.
    pub fn new(backend: Arc<dyn Sandbox>, emitter: Emitter) -> Self {
        RunSandboxes {
            backend,
            run_id: emitter.run_id().to_owned(),
            emitter,
            state: Arc::new(Mutex::new(TrackState::default())),
            in_flight: TaskTracker::new(),
            network: Arc::new(OnceCell::new()),
        }
    }

    /// The run's network, if it has been made (by the first provision on
    /// [`Network::Run`], or [`RunSandboxes::ensure_run_network`]).
    pub fn run_network(&self) -> Option<Arc<RunNetwork>> {
        self.network.get().cloned()
    }

    /// The run's network, made (with its host rules) if it does not exist yet. Servers
    /// that the run's sandboxes must reach (the model gateway) bind on its
    /// [`gateway`](RunNetwork::gateway) address and open their port with
    /// [`RunNetwork::allow_port`]; it is removed at teardown.
    ///
    /// # Errors
    /// [`SandboxError::RunEnded`] once teardown began; what
    /// [`RunNetwork::create`] returns.
    pub async fn ensure_run_network(&self) -> Result<Arc<RunNetwork>, SandboxError> {
        {
            let mut state = self.lock();
            if state.ended {
                return Err(ended_error(&self.run_id));
            }
            state.attempted = true;
        }
        let this = self.clone();
        // In a task of its own, like a provision: teardown waits for it.
        let task = self
            .in_flight
            .spawn(async move { this.network_now().await });
        match task.await {
            Ok(result) => result,
            Err(join) => Err(SandboxError::Backend {
                backend: self.backend.backend_name(),
                operation: "create network",
                source: Box::new(join),
            }),
        }
    }

    async fn network_now(&self) -> Result<Arc<RunNetwork>, SandboxError> {
        self.network
            .get_or_try_init(|| async {
                RunNetwork::create(self.backend.as_ref(), &self.run_id)
                    .await
                    .map(Arc::new)
            })
            .await
            .cloned()
    }

    /// Provisions `spec` on the backend, on the run's network with its egress applied
    /// when it asks for [`Network::Run`].
    async fn provision_now(&self, spec: &mut SandboxSpec) -> Result<SandboxId, SandboxError> {
        if spec.network != Network::Run {
            return self.backend.provision(spec).await;
        }
        let network = self.network_now().await?;
        // The host, as the sandbox reaches it: the network's gateway address.
        spec.extra_hosts
            .insert(HOST_GATEWAY_NAME.to_owned(), network.gateway().to_string());
        let proxy = match &spec.egress {
            Egress::Allow(policy) => {
                let proxy = EgressProxy::start(
                    network.gateway(),
                    policy.clone(),
                    self.emitter.clone(),
                    spec.node.clone(),
                )
                .await
                .map_err(|source| SandboxError::EgressProxy {
                    run_id: self.run_id.clone(),
                    address: network.gateway().to_string(),
                    source,
                })?;
                network.allow_port(proxy.address().port()).await?;
                for variable in PROXY_VARIABLES {
                    spec.env.insert(variable.to_owned(), proxy.url());
                }
                let no_proxy = format!("localhost,127.0.0.1,{}", network.gateway());
                spec.env.insert("NO_PROXY".to_owned(), no_proxy.clone());
                spec.env.insert("no_proxy".to_owned(), no_proxy);
                Some(proxy)
            }
            Egress::None | Egress::Gateway => None,
        };
        let id = self.backend.provision(spec).await?;
        let applied = async {
            if proxy.is_none() && spec.egress != Egress::None {
                return Ok(());
            }
            let address = self
                .backend
                .run_network_address(&id)
                .await?
                .ok_or_else(|| SandboxError::Isolation {
                    run_id: self.run_id.clone(),
                    message: format!(
                        "sandbox {} has no address on {}",
                        id.short(),
                        network.name()
                    ),
                })?;
            match &proxy {
                Some(proxy) => proxy.allow_client(address),
                None => network.deny_sandbox(address).await?,
            }
            Ok(())
        }
        .await;
        if let Err(e) = applied {
            if let Err(cleanup) = self.backend.destroy(&id).await {
                tracing::warn!(sandbox = %id.short(), "destroying a sandbox whose egress could not be set: {cleanup}");
            }
            return Err(e);
        }
        if let Some(proxy) = proxy {
            self.lock().proxies.push(proxy);
        }
        Ok(id)
    }

    /// The backend sandboxes are made on.
    pub fn backend(&self) -> &Arc<dyn Sandbox> {
        &self.backend
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Provisions a sandbox for `node` from `spec` (its `run_id` and `node` are set
    /// from the run and `node`), records it, and emits `sandbox_provisioned`.
    ///
    /// The provision runs to completion in its own task even if this future is
    /// dropped; what it makes is destroyed by [`RunSandboxes::teardown`].
    ///
    /// # Errors
    /// The backend's [`SandboxError`]; [`SandboxError::RunEnded`] once teardown began.
    pub async fn provision(
        &self,
        node: Option<&str>,
        mut spec: SandboxSpec,
    ) -> Result<SandboxId, SandboxError> {
        spec.run_id = self.run_id.clone();
        spec.node = node.map(str::to_owned);
        {
            let mut state = self.lock();
            if state.ended {
                return Err(ended_error(&self.run_id));
            }
            state.attempted = true;
        }
        let this = self.clone();
        let node = spec.node.clone();
        let task = self.in_flight.spawn(async move {
            let mut spec = spec;
            let id = this.provision_now(&mut spec).await?;
            let ended = {
                let mut state = this.lock();
                if !state.ended {
                    state.live.push((id.clone(), node.clone()));
                }
                state.ended
            };
            if ended {
                // Teardown started while this was being made: do not leak it.
                if let Err(e) = this.backend.destroy(&id).await {
                    tracing::warn!(sandbox = %id.short(), "destroying a sandbox made during teardown: {e}");
                }
                return Err(ended_error(&this.run_id));
            }
            this.emitter.emit_or_log(
                node.as_deref(),
                EventPayload::SandboxProvisioned {
                    sandbox_id: id.to_string(),
                    backend: this.backend.backend_name().to_owned(),
                    image: spec.image.clone(),
                    network: Some(match spec.network {
                        Network::Run => crate::sandbox::run_network_name(&this.run_id),
                        other => other.as_str().to_owned(),
                    }),
                },
            );
            Ok(id)
        });
        match task.await {
            Ok(result) => result,
            Err(join) => Err(SandboxError::Backend {
                backend: self.backend.backend_name(),
                operation: "provision",
                source: Box::new(join),
            }),
        }
    }

    /// The sandboxes provisioned and not yet destroyed.
    pub fn live(&self) -> Vec<SandboxId> {
        self.lock().live.iter().map(|(id, _)| id.clone()).collect()
    }

    /// Destroys every sandbox of the run and emits `sandbox_destroyed` for each one
    /// this tracker made. Refuses later provisions, waits for those in flight, then
    /// also destroys any other sandbox labelled with the run's id. Safe to call more
    /// than once.
    pub async fn teardown(&self) -> TeardownReport {
        let attempted = {
            let mut state = self.lock();
            state.ended = true;
            state.attempted
        };
        if !attempted {
            return TeardownReport::default();
        }
        self.in_flight.close();
        self.in_flight.wait().await;
        let tracked = std::mem::take(&mut self.lock().live);

        let mut report = TeardownReport::default();
        let destroys = tracked.iter().map(|(id, _)| self.backend.destroy(id));
        let results = futures::future::join_all(destroys).await;
        for ((id, node), result) in tracked.into_iter().zip(results) {
            match result {
                Ok(()) => {
                    self.emitter.emit_or_log(
                        node.as_deref(),
                        EventPayload::SandboxDestroyed {
                            sandbox_id: id.to_string(),
                        },
                    );
                    report.destroyed.push(id);
                }
                Err(e) => {
                    tracing::warn!(sandbox = %id.short(), "teardown could not destroy sandbox: {e}");
                    report.failed.push((id, e));
                }
            }
        }

        // Belt and braces: anything else labelled with this run (made by a provision
        // whose result was lost) goes too.
        let labels = BTreeMap::from([(LABEL_RUN_ID.to_owned(), self.run_id.clone())]);
        match self.backend.list(&labels).await {
            Ok(stray) => {
                for info in stray {
                    if report.destroyed.contains(&info.id) {
                        continue;
                    }
                    match self.backend.destroy(&info.id).await {
                        Ok(()) => {
                            self.emitter.emit_or_log(
                                info.node(),
                                EventPayload::SandboxDestroyed {
                                    sandbox_id: info.id.to_string(),
                                },
                            );
                            report.destroyed.push(info.id);
                        }
                        Err(e) => report.failed.push((info.id, e)),
                    }
                }
            }
            Err(e) => tracing::warn!("teardown could not list the run's sandboxes: {e}"),
        }

        // Then what the sandboxes used: their proxies, the network and its host rules.
        for proxy in std::mem::take(&mut self.lock().proxies) {
            proxy.stop();
        }
        if let Some(network) = self.network.get() {
            match network.remove(self.backend.as_ref()).await {
                Ok(()) => report.network_removed = Some(network.name().to_owned()),
                Err(e) => {
                    tracing::warn!(
                        network = network.name(),
                        "teardown could not remove the run network: {e}"
                    );
                    report.network_failed = Some(e);
                }
            }
        }
        report
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TrackState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn ended_error(run_id: &str) -> SandboxError {
    SandboxError::RunEnded {
        run_id: run_id.to_owned(),
    }
}
