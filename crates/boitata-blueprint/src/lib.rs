//! Blueprints: YAML graphs of nodes that a run walks.
//!
//! This crate owns the blueprint model ([`model`]), its validation with located
//! diagnostics ([`parse`], [`Diagnostics`]), `{placeholder}` templating ([`template`]),
//! run params ([`params`]), the executor ([`Executor`]: the graph walk, routing,
//! limits, timeouts, cancellation, guaranteed cleanup), the node-handler interface
//! ([`NodeHandler`], [`NodeHandlers`], [`RunHooks`]), the host node types ([`host`]:
//! `exec` without a container, `agent`), Mermaid output ([`graph`]) and finding
//! blueprint files ([`mod@load`]).
//!
//! It does not own sandboxes: the `provision`, `checkout`, in-container `exec` and
//! `agent_sandbox` handlers live in `boitata-orchestrator` and plug in through
//! [`NodeHandlers::register`]; it does not own the run store or any printing either:
//! events go to the [`Emitter`](boitata_core::Emitter) the caller supplies.
//!
//! # Example
//!
//! ```
//! use std::{collections::BTreeMap, sync::Arc};
//! use boitata_blueprint::{Executor, NodeHandlers, RunRequest, RuntimeSource};
//! use boitata_core::{config::Config, Emitter, Redactor, RunStatus};
//! use tokio_util::sync::CancellationToken;
//!
//! let yaml = r#"
//! name: hello
//! entry: greet
//! nodes:
//!   greet: { type: exec, command: "echo hello {task}" }
//!   shout: { type: exec, command: "echo '{greet}' | tr a-z A-Z" }
//! edges:
//!   - { from: greet, when: success, to: shout }
//! "#;
//! let validated = boitata_blueprint::parse(yaml, "hello.yaml").map_err(|d| d.render(80)).unwrap();
//!
//! let request = RunRequest {
//!     task: "world".into(),
//!     params: BTreeMap::new(),
//!     workspace: std::env::temp_dir(),
//!     runtime: RuntimeSource::Config {
//!         config: Config::default(),
//!         env: Arc::new(BTreeMap::<String, String>::new()),
//!     },
//!     emitter: Emitter::new("run-1", None, Redactor::default()),
//!     cancel: CancellationToken::new(),
//! };
//! let report = tokio::runtime::Runtime::new().unwrap().block_on(async {
//!     Executor::new(NodeHandlers::host()).run(&validated.blueprint, request).await
//! }).unwrap();
//! assert_eq!(report.status, RunStatus::Succeeded);
//! assert_eq!(report.last_output.as_deref(), Some("HELLO WORLD\n"));
//! ```

mod diagnostic;
pub mod egress;
pub mod executor;
pub mod graph;
pub mod host;
pub mod load;
pub mod model;
pub mod node;
pub mod params;
mod suggest;
pub mod template;
mod validate;
mod yaml;

pub use diagnostic::{Diagnostics, Location, Problem, Severity};
pub use executor::{
    check_provider, Executor, ExecutorOptions, MissingHandler, RunError, RunProblem, RunReport,
    RunRequest, Step,
};
pub use load::{find, load, FindError, LoadError};
pub use model::{
    AgentSandboxSpec, AgentSpec, Blueprint, CheckoutSpec, Edge, ExecSpec, HandlerKind, Node,
    NodeSpec, NodeType, Param, ProvisionSpec, When, END,
};
pub use node::{
    CleanupFuture, NodeContext, NodeError, NodeHandler, NodeHandlers, NodeOutcome, RunEnding,
    RunHooks, RuntimeSource, Teardown,
};
pub use params::ParamError;
pub use validate::{parse, Validated, BLUEPRINT_FIELDS, EDGE_FIELDS};
pub use yaml::MAX_BLUEPRINT_BYTES;
