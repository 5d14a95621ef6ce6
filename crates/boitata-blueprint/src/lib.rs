//! Blueprints: YAML graphs of nodes that a run walks.
//!
//! This crate owns the blueprint model ([`model`]), its validation with located
//! diagnostics, `{placeholder}` templating ([`template`]), the executor ([`Executor`]:
//! the graph walk, routing, limits, timeouts, cancellation, guaranteed cleanup), the
//! node-handler interface ([`NodeHandler`]) and the host node types ([`host`]: `exec`
//! without a container, `agent`). It does not own sandboxes: the `provision`,
//! `checkout`, in-container `exec` and `agent_sandbox` handlers live in
//! `boitata-orchestrator` and plug in through [`NodeHandlers`].

mod diagnostic;
pub mod executor;
pub mod host;
pub mod model;
pub mod node;
pub mod params;
mod suggest;
pub mod template;
mod validate;
mod yaml;

pub use diagnostic::{Diagnostics, Location, Problem, Severity};
pub use executor::{Executor, ExecutorOptions, RunError, RunReport, RunRequest, Step};
pub use model::{
    AgentSandboxSpec, AgentSpec, Blueprint, CheckoutSpec, Edge, ExecSpec, HandlerKind, Node,
    NodeSpec, NodeType, Param, ProvisionSpec, When, END,
};
pub use node::{
    CleanupFuture, NodeContext, NodeError, NodeHandler, NodeHandlers, NodeOutcome, RunEnding,
    RunHooks, RuntimeSource, Teardown,
};
pub use validate::{parse, Validated, BLUEPRINT_FIELDS, EDGE_FIELDS};
pub use yaml::MAX_BLUEPRINT_BYTES;
