//! Boitata's engine: everything an agent run needs, with no opinion on where it runs.
//!
//! It owns:
//! - [`event`]: the one [`Event`] type every surface shows, and the [`Emitter`] that
//!   numbers, redacts, records and dispatches events;
//! - [`provider`]: model APIs (`openai`, `anthropic`, `scripted`) behind one trait;
//! - [`tool`] and [`workspace`]: the agent's tools, confined beneath a workspace root;
//! - [`agent`]: the agent loop (turns, tool calls, `max_turns`, cancellation);
//! - [`budget`]: what a run may spend on the model, and the meter that decides;
//! - [`config`] and [`runtime`]: settings, and the one place that builds a provider and
//!   tools from them (used by the CLI, the server and the in-sandbox agent);
//! - [`store`]: the SQLite run store (runs and their events, append-only).
//!
//! It does not own blueprints (`boitata-blueprint`), sandboxes (`boitata-orchestrator`),
//! ACP (`boitata-acp`) or any binary.

pub mod agent;
pub mod budget;
pub mod config;
pub mod event;
pub mod process;
pub mod provider;
pub mod redact;
pub mod runtime;
pub mod store;
pub mod tool;
pub mod workspace;

pub use event::{Emitter, Event, EventPayload, EventSink, Outcome, OutputStream, RunStatus};
pub use redact::Redactor;
