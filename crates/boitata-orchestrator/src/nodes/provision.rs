//! `provision`: create a sandbox. Output: the sandbox id.
//!
//! Fields: `image` (never pulled: it must exist locally), `cpus`, `memory`, `pids`,
//! `network`, `egress`, `allow`, `allow_all`, `workdir` (default `/workspace`), and the
//! common `env` (the sandbox's own environment: no secrets). Every limit not set takes
//! the backend default ([`Limits`](crate::Limits)); capabilities are all dropped and
//! `no-new-privileges` is set.
//!
//! - `network: run` (the default): the run's own network (see [`crate::network`]);
//!   the orchestrator reaches port [`DEFAULT_AGENT_PORT`] (for an `agent_sandbox`
//!   node) on the sandbox's address there, and [`HOST_GATEWAY_NAME`] resolves to the
//!   network's gateway address. `egress` says what else it reaches: `gateway` (the
//!   default: the ports the run opens on the gateway address), `none` (nothing on the
//!   host), `allow` (also the `allow` list, or everything with `allow_all: true`,
//!   through the egress proxy; see [`crate::egress`]).
//! - `network: none`: no network at all.
//! - `network: bridge`: Docker's shared bridge, **not isolated**: an explicit opt-out,
//!   which the run's `sandbox_provisioned` event marks. Port [`DEFAULT_AGENT_PORT`] is
//!   published on host loopback and [`HOST_GATEWAY_NAME`] resolves to the host's
//!   address on the bridge.

use async_trait::async_trait;
use boitata_blueprint::{Node, NodeContext, NodeError, NodeHandler, NodeOutcome, NodeSpec};

use super::{SandboxNodes, DEFAULT_AGENT_PORT};
use crate::egress::EgressPolicy;
use crate::sandbox::{Egress, Network, SandboxSpec, HOST_GATEWAY, HOST_GATEWAY_NAME};

/// The `provision` handler.
#[derive(Debug, Clone)]
pub struct Provision {
    nodes: SandboxNodes,
}

impl Provision {
    /// A handler making sandboxes with `nodes`' backend.
    pub fn new(nodes: SandboxNodes) -> Self {
        Provision { nodes }
    }
}

#[async_trait]
impl NodeHandler for Provision {
    async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
        let NodeSpec::Provision(fields) = &node.spec else {
            return Err(NodeError::Invalid(format!(
                "node {:?}: the provision handler cannot run a {} node",
                node.id,
                node.node_type()
            )));
        };
        let spec = sandbox_spec(node, fields, ctx.run_id())?;
        let tracker = self.nodes.run_sandboxes(ctx);
        let id = tokio::select! {
            // The provision itself goes on in its own task; teardown destroys what it made.
            () = ctx.cancel().cancelled() => return Err(NodeError::Cancelled),
            made = tracker.provision(Some(ctx.node_id()), spec) => made.map_err(NodeError::other)?,
        };
        Ok(NodeOutcome::success(id.to_string()))
    }
}

/// The sandbox a `provision` node asks for.
fn sandbox_spec(
    node: &Node,
    fields: &boitata_blueprint::ProvisionSpec,
    run_id: &str,
) -> Result<SandboxSpec, NodeError> {
    let invalid = |message: String| NodeError::Invalid(format!("node {:?}: {message}", node.id));
    let mut spec = SandboxSpec::new(fields.image.trim(), run_id).node(node.id.clone());
    if let Some(cpus) = fields.cpus {
        spec.limits.cpus = cpus;
    }
    if let Some(memory) = fields.memory_bytes {
        spec.limits.memory_bytes = memory;
    }
    if let Some(pids) = fields.pids {
        spec.limits.pids = i64::from(pids);
    }
    if let Some(workdir) = &fields.workdir {
        spec.workdir = workdir.trim().to_owned();
    }
    spec.network = match fields.network.as_deref().map(str::trim) {
        None | Some("run") => Network::Run,
        Some("bridge") => Network::Bridge,
        Some("none") => Network::None,
        Some(other) => {
            return Err(invalid(format!(
                "network {other:?} is not supported: use run (the default), none or bridge"
            )))
        }
    };
    spec.egress = match fields.egress.as_deref().map(str::trim) {
        None | Some("gateway") => Egress::Gateway,
        Some("none") => Egress::None,
        Some("allow") => Egress::Allow(
            EgressPolicy::new(
                fields.allow.as_deref().unwrap_or_default(),
                fields.allow_all == Some(true),
            )
            .map_err(invalid)?,
        ),
        Some(other) => {
            return Err(invalid(format!(
                "egress {other:?} is not supported: use none, gateway or allow"
            )))
        }
    };
    if spec.network != Network::Run && fields.egress.is_some() {
        return Err(invalid(format!(
            "egress applies to the run's own network, not to network {}",
            spec.network.as_str()
        )));
    }
    if spec.network != Network::None {
        spec.ports.push(DEFAULT_AGENT_PORT);
    }
    if spec.network == Network::Bridge {
        // So that an agent inside can reach a model server on the host.
        spec.extra_hosts
            .insert(HOST_GATEWAY_NAME.to_owned(), HOST_GATEWAY.to_owned());
    }
    spec.env = node.env.clone();
    spec.validate().map_err(|e| invalid(e.to_string()))?;
    Ok(spec)
}
