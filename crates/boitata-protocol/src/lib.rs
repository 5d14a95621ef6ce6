//! Boitata's wire types: what the engine, the server, the CLI and ACP peers say to each
//! other, and nothing that does I/O.
//!
//! It owns:
//! - [`event`]: the one [`Event`] type (with [`EventPayload`], [`Outcome`],
//!   [`OutputStream`]) that the CLI's `--json`, the audit log, the server's SSE stream and
//!   the ACP `_meta.boitata` payload all carry, and a run's [`RunStatus`];
//! - [`api`]: the HTTP API's request and response bodies and their OpenAPI schemas;
//! - [`redact`]: the [`Redactor`](redact::Redactor) every string passes before it leaves
//!   a run (events, the store, logs, tool results to the model): what may never be on
//!   the wire is decided here, once;
//! - [`ToolSpec`]: how a tool describes itself to a model, the one thing the tools
//!   (`boitata-tools`) and the model providers (`boitata-provider`) share.
//!
//! It does not own how events are made (the emitter, redaction: `boitata-core`), stored
//! (`boitata-store`) or sent (`boitata-server`). It depends on no async runtime, no HTTP
//! client and no database, so any client can use it.
//!
//! # Example
//!
//! ```
//! use boitata_protocol::{Event, EventPayload, RunStatus};
//!
//! let line = r#"{"run_id":"r1","seq":7,"ts":"2026-11-29T13:04:20.123Z",
//!               "type":"run_finished","status":"succeeded"}"#;
//! let event: Event = serde_json::from_str(line)?;
//! assert!(matches!(
//!     event.payload,
//!     EventPayload::RunFinished { status: RunStatus::Succeeded, .. }
//! ));
//! assert_eq!(RunStatus::Succeeded.exit_code(), 0);
//! # Ok::<(), serde_json::Error>(())
//! ```

#![deny(missing_docs)]

pub mod api;
pub mod event;
pub mod redact;

mod tool_spec;

pub use event::{Event, EventPayload, Outcome, OutputStream, RunStatus};
pub use tool_spec::ToolSpec;
