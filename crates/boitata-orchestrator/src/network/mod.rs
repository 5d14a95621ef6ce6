//! A run's own network: where its sandboxes can reach each other and nothing else.
//!
//! [`RunNetwork::create`] makes the backend's network (`boitata-run-RUN`, internal: no
//! route out; see [`Sandbox::create_run_network`]) and closes the host to it with
//! [`firewall`] rules: a sandbox on it reaches the host only on the ports opened with
//! [`RunNetwork::allow_port`] on the network's gateway address (where the run's egress
//! proxy and model gateway listen). Other runs' sandboxes are on other networks, which
//! Docker keeps apart (by address and by name: each network has its own DNS).
//!
//! [`RunSandboxes`](crate::RunSandboxes) creates the network before the run's first
//! sandbox that needs it and [`removes`](RunNetwork::remove) it at teardown; the reaper
//! removes those left by a killed process, with their host rules.

pub mod firewall;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Mutex;

use crate::sandbox::{RunNetworkInfo, Sandbox, SandboxError};
pub use firewall::{Firewall, FirewallError};

/// A run's network with its host rules. See the module docs.
#[derive(Debug)]
pub struct RunNetwork {
    run_id: String,
    info: RunNetworkInfo,
    gateway: IpAddr,
    interface: String,
    firewall: Firewall,
    allowed_ports: Mutex<BTreeSet<u16>>,
}

impl RunNetwork {
    /// Creates run `run_id`'s network on `backend` and sets its host rules. On any
    /// failure nothing is left behind (the network is removed) and no sandbox can be
    /// started unfirewalled.
    ///
    /// The rules are set once the network exists, never before: the reaper takes rules
    /// whose network it cannot see for a dead run's strays, and would remove those of a
    /// network still being made.
    ///
    /// # Errors
    /// The backend's [`SandboxError`]; [`SandboxError::Isolation`] when the host rules
    /// cannot be set (no `iptables`, not root, a daemon on another machine).
    pub async fn create(backend: &dyn Sandbox, run_id: &str) -> Result<RunNetwork, SandboxError> {
        let info = backend.create_run_network(run_id).await?;
        match Self::isolate(run_id, info.clone()).await {
            Ok(network) => Ok(network),
            Err(e) => {
                if let Err(cleanup) = backend.remove_run_network(&info.name).await {
                    tracing::warn!(network = %info.name, "removing a network that could not be isolated: {cleanup}");
                }
                Err(e)
            }
        }
    }

    async fn isolate(run_id: &str, info: RunNetworkInfo) -> Result<RunNetwork, SandboxError> {
        let isolation = |message: String| SandboxError::Isolation {
            run_id: run_id.to_owned(),
            message,
        };
        let (Some(gateway), Some(interface)) = (info.gateway, info.interface.clone()) else {
            return Err(isolation(format!(
                "network {} has no gateway address or bridge interface: host rules cannot be set",
                info.name
            )));
        };
        if !std::path::Path::new("/sys/class/net")
            .join(&interface)
            .exists()
        {
            return Err(isolation(format!(
                "network {}'s bridge {interface} is not on this machine (is DOCKER_HOST a \
                 daemon elsewhere?): its host rules cannot be set here; run boitata on the \
                 daemon's machine, or opt out with network: bridge (not isolated)",
                info.name
            )));
        }
        let firewall = Firewall::detect()
            .await
            .map_err(|e| isolation(format!("network {}: {e}", info.name)))?;
        firewall
            .isolate(run_id, &interface)
            .await
            .map_err(|e| isolation(format!("network {}: {e}", info.name)))?;
        tracing::debug!(network = %info.name, %interface, firewall = firewall.program(), "run network isolated");
        Ok(RunNetwork {
            run_id: run_id.to_owned(),
            info,
            gateway,
            interface,
            firewall,
            allowed_ports: Mutex::new(BTreeSet::new()),
        })
    }

    /// The network's name, `boitata-run-RUN`.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The backend's record of the network.
    pub fn info(&self) -> &RunNetworkInfo {
        &self.info
    }

    /// The host's address on the network: where sandboxes reach the ports opened with
    /// [`RunNetwork::allow_port`] (bind servers for the sandboxes there).
    pub fn gateway(&self) -> IpAddr {
        self.gateway
    }

    /// The host's bridge interface of the network (`bt-…`, see
    /// [`run_network_interface`](crate::sandbox::run_network_interface)).
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The `iptables` program the host rules are set with.
    pub fn firewall(&self) -> &Firewall {
        &self.firewall
    }

    /// Lets the run's sandboxes open TCP connections to [`RunNetwork::gateway`]`:port`
    /// (for a server bound there, such as the model gateway or the egress proxy).
    /// Can be called at any time while the network exists; opening a port twice is a
    /// no-op.
    ///
    /// # Errors
    /// [`SandboxError::Isolation`] when the rule cannot be set.
    pub async fn allow_port(&self, port: u16) -> Result<(), SandboxError> {
        if !self.lock().insert(port) {
            return Ok(());
        }
        if let Err(e) = self
            .firewall
            .allow_port(&self.run_id, self.gateway, port)
            .await
        {
            self.lock().remove(&port);
            return Err(SandboxError::Isolation {
                run_id: self.run_id.clone(),
                message: format!("cannot open port {port} of network {}: {e}", self.name()),
            });
        }
        Ok(())
    }

    /// The ports opened with [`RunNetwork::allow_port`].
    pub fn allowed_ports(&self) -> BTreeSet<u16> {
        self.lock().clone()
    }

    /// Forbids the sandbox at `address` (on this network) to open any connection to
    /// the host, allowed ports included (`egress: none`).
    ///
    /// # Errors
    /// [`SandboxError::Isolation`] when the rule cannot be set.
    pub async fn deny_sandbox(&self, address: IpAddr) -> Result<(), SandboxError> {
        self.firewall
            .deny_source(&self.run_id, address)
            .await
            .map_err(|e| SandboxError::Isolation {
                run_id: self.run_id.clone(),
                message: format!("cannot close the host to sandbox {address}: {e}"),
            })
    }

    /// Removes the host rules and the network from `backend`, concurrently. Call it
    /// after the sandboxes on it are destroyed.
    ///
    /// # Errors
    /// [`SandboxError::Isolation`] when a rule cannot be removed (the network is
    /// removed all the same); the backend's error when the network cannot be.
    pub async fn remove(&self, backend: &dyn Sandbox) -> Result<(), SandboxError> {
        // No sandbox is left on it: the rules and the network can go at once.
        let (rules, network) = tokio::join!(
            self.firewall
                .remove_isolation(&self.run_id, &self.interface),
            backend.remove_run_network(&self.info.name)
        );
        network?;
        rules.map_err(|e| SandboxError::Isolation {
            run_id: self.run_id.clone(),
            message: format!(
                "cannot remove the host rules of network {}: {e}",
                self.name()
            ),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u16>> {
        self.allowed_ports.lock().unwrap_or_else(|p| p.into_inner())
    }
}
