//! Sandboxes for Boitata runs: where a blueprint's commands and agent run when they
//! must not run on the host.
//!
//! It owns:
//! - [`sandbox`]: the [`Sandbox`] backend trait (`provision`, `exec`, `endpoint`,
//!   `upload`, `destroy`, `list`) and its Docker implementation,
//!   [`DockerBackend`] (bollard; lazy connection,
//!   hardened containers);
//! - [`tracking`]: [`RunSandboxes`], which records every sandbox a run made and
//!   destroys them all when the run ends, however it ends;
//! - [`nodes`]: the sandbox node types (`provision`, `checkout`, `exec` with
//!   `container`, and `agent_sandbox`, which drives `boitata-agent` inside a sandbox
//!   over ACP) for the blueprint executor, registered by [`SandboxNodes`], which
//!   is also the executor hook that tears a run's sandboxes down when it ends;
//! - [`network`]: [`RunNetwork`](network::RunNetwork), a run's own network and the
//!   host rules that keep its sandboxes off the host's services;
//! - [`egress`]: [`EgressProxy`](egress::EgressProxy), the only way out of a run
//!   network, where a node's egress policy allows;
//! - [`gateway`]: the [`ModelGateway`], which serves the provider's API to agents in
//!   sandboxes with a per-run token and forwards with the real key, counting usage
//!   and enforcing the run's budget;
//! - [`reaper`]: [`gc`](reaper::gc), which removes sandboxes whose run is gone;
//! - [`archive`]: the tar archives that carry files into a sandbox.
//!
//! It does not own the blueprint model or executor (`boitata-blueprint`), the run
//! store or events (`boitata-core`), nor any binary.
//!
//! # Example
//!
//! ```no_run
//! use boitata_orchestrator::{CollectOutput, DockerBackend, ExecSpec, Network, Sandbox, SandboxSpec};
//!
//! # async fn demo() -> Result<(), boitata_orchestrator::SandboxError> {
//! let docker = DockerBackend::from_env(); // no connection yet
//! // The backend alone: no network (a run's own network is made by RunSandboxes).
//! let spec = SandboxSpec::new("boitata-base:bookworm", "run-1").network(Network::None);
//! let id = docker.provision(&spec).await?;
//! let mut out = CollectOutput::default();
//! let status = docker.exec(&id, &ExecSpec::shell("echo hi"), &mut out).await?;
//! assert_eq!(status.code(), Some(0));
//! assert_eq!(out.stdout_text(), "hi\n");
//! docker.destroy(&id).await?;
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod archive;
pub mod egress;
pub mod gateway;
pub mod network;
pub mod nodes;
pub mod reaper;
pub mod sandbox;
pub mod tracking;

pub use gateway::ModelGateway;
pub use nodes::{needs_sandbox, SandboxNodes, DEFAULT_AGENT_PORT};
pub use sandbox::docker::DockerBackend;
pub use sandbox::{
    CollectOutput, DiscardOutput, Egress, ExecSpec, ExecStatus, Hardening, Limits, Network,
    OutputSink, RunNetworkInfo, Sandbox, SandboxError, SandboxId, SandboxInfo, SandboxSpec,
};
pub use tracking::{RunSandboxes, TeardownReport};
