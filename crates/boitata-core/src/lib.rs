//! Boitata's engine: runs the agent on a task, with no opinion on where it runs.
//!
//! It owns:
//! - [`event`]: the [`Emitter`] that numbers, redacts, records and dispatches a run's
//!   events (the [`Event`] type is `boitata-protocol`'s, re-exported here);
//! - [`agent`]: the agent loop (turns, tool calls, `max_turns`, cancellation);
//! - [`budget`]: what a run may spend on the model, and the meter that decides;
//! - [`config`] and [`runtime`]: settings, and the one place that builds a provider and
//!   tools from them (used by the CLI, the server and the in-sandbox agent);
//! - [`store`]: emitters that record into a run store ([`store::RunEmitters`]), with
//!   `boitata-store`'s types re-exported.
//!
//! It does not own the model APIs (`boitata-provider`), the tools (`boitata-tools`),
//! the store's implementations (`boitata-store`), the wire types and redaction
//! (`boitata-protocol`), blueprints (`boitata-blueprint`), sandboxes
//! (`boitata-orchestrator`), ACP (`boitata-acp`) or any binary.
//!
//! # Example
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use boitata_core::config::{Config, ProcessEnv};
//! use boitata_core::runtime::Runtime;
//! use boitata_core::Emitter;
//! use boitata_tools::workspace::Workspace;
//! use tokio_util::sync::CancellationToken;
//!
//! let config = Config::load(None, &ProcessEnv)?;
//! let runtime = Runtime::from_config(config, &ProcessEnv)?;
//! let emitter = Emitter::new("run-1", None, runtime.redactor());
//! let workspace = Workspace::open(".")?;
//! let outcome = runtime
//!     .agent()
//!     .run("make the tests pass", &workspace, &emitter, None, &CancellationToken::new())
//!     .await?;
//! println!("{outcome:?}");
//! # Ok(())
//! # }
//! ```

pub mod agent;
pub mod budget;
pub mod config;
pub mod event;
pub mod runtime;
pub mod store;

pub use boitata_protocol::redact;
pub use event::{Emitter, Event, EventPayload, EventSink, Outcome, OutputStream, RunStatus};
pub use redact::Redactor;
