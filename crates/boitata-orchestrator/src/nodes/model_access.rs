//! How an agent in a sandbox reaches the model: through the run's grant on the
//! orchestrator's [`ModelGateway`], never with the provider's key.
//!
//! A run gets one grant, made when its first `agent_sandbox` node runs and revoked
//! when the run ends (a teardown step of the run), whatever ends it. Each sandbox an
//! agent runs in gets the gateway listening on its network's gateway address.

use std::net::SocketAddr;

use boitata_blueprint::{NodeContext, NodeError};
use boitata_core::config::Config;

use super::SandboxNodes;
use crate::gateway::{GatewayError, ModelGateway, RunGrant, Upstream};
use crate::sandbox::{SandboxError, SandboxId};

/// What the agent is given instead of the provider's key.
#[derive(Clone)]
pub(crate) struct ModelAccess {
    /// The gateway's URL, as the provider's `base_url`.
    pub(crate) base_url: String,
    /// The run's gateway token, as the provider's API key.
    pub(crate) token: String,
}

impl std::fmt::Debug for ModelAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelAccess")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// Why the agent could not be given access to the model.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ModelAccessError {
    #[error("node {node:?}: model gateway: {source}")]
    Gateway {
        node: String,
        #[source]
        source: GatewayError,
    },
    #[error("node {node:?}: cannot find where sandbox {sandbox} reaches the host: {source}")]
    Sandbox {
        node: String,
        sandbox: String,
        #[source]
        source: SandboxError,
    },
}

impl SandboxNodes {
    /// Access to the model for the agent of `ctx`'s node in `sandbox`: the run's
    /// grant (made on first use, its revocation registered with the run's teardown),
    /// served on the sandbox network's gateway address. `None` for a provider that
    /// calls no model API (`scripted`): its agent needs no gateway.
    pub(crate) async fn model_access(
        &self,
        ctx: &NodeContext,
        sandbox: &SandboxId,
        config: &Config,
        api_key: Option<String>,
    ) -> Result<Option<ModelAccess>, NodeError> {
        let node = ctx.node_id().to_owned();
        let gateway_failed = |source: GatewayError| {
            NodeError::other(ModelAccessError::Gateway {
                node: node.clone(),
                source,
            })
        };
        let Some(upstream) = Upstream::from_config(config, api_key).map_err(gateway_failed)? else {
            return Ok(None);
        };
        let api = upstream.api;
        let gateway = self.gateway().map_err(gateway_failed)?;
        let token = self
            .run_grant(ctx, &gateway, upstream)
            .map_err(gateway_failed)?;
        gateway.set_node(&token, Some(ctx.node_id()));
        let ip = self
            .backend()
            .gateway_address(sandbox)
            .await
            .map_err(|source| {
                NodeError::other(ModelAccessError::Sandbox {
                    node: node.clone(),
                    sandbox: sandbox.short().to_owned(),
                    source,
                })
            })?;
        let addr = gateway.serve_on(&token, ip).await.map_err(gateway_failed)?;
        self.allow_gateway_port(ctx, addr).await.map_err(|source| {
            NodeError::other(ModelAccessError::Sandbox {
                node: node.clone(),
                sandbox: sandbox.short().to_owned(),
                source,
            })
        })?;
        Ok(Some(ModelAccess {
            base_url: api.base_url(addr),
            token,
        }))
    }

    /// Opens the gateway listener's port at `addr` in the host rules of the run's
    /// network (which drop everything else a sandbox sends to the host). A sandbox on
    /// `bridge` (an explicit, not-isolated opt-out) has no run network and no rules.
    ///
    /// # Errors
    /// The host rules could not be changed (see [`RunNetwork::allow_port`](crate::network::RunNetwork::allow_port)).
    async fn allow_gateway_port(
        &self,
        ctx: &NodeContext,
        addr: SocketAddr,
    ) -> Result<(), SandboxError> {
        match self.run_sandboxes(ctx).run_network() {
            Some(network) => network.allow_port(addr.port()).await,
            None => Ok(()),
        }
    }

    /// The run's gateway token, granting it on first use.
    fn run_grant(
        &self,
        ctx: &NodeContext,
        gateway: &ModelGateway,
        upstream: Upstream,
    ) -> Result<String, GatewayError> {
        let mut tokens = self.lock_gateway_tokens();
        if let Some(token) = tokens.get(ctx.run_id()) {
            return Ok(token.clone());
        }
        let token = gateway.grant(RunGrant {
            run_id: ctx.run_id().to_owned(),
            upstream,
            budget: ctx.budget().clone(),
            emitter: ctx.emitter().clone(),
        })?;
        tokens.insert(ctx.run_id().to_owned(), token.clone());
        let this = self.clone();
        let gateway = gateway.clone();
        let run_id = ctx.run_id().to_owned();
        let revoked = token.clone();
        ctx.teardown().defer(
            format!("revoke the model gateway token of run {run_id}"),
            async move {
                gateway.revoke(&revoked);
                this.lock_gateway_tokens().remove(&run_id);
            },
        );
        Ok(token)
    }
}
