//! The Boitata orchestrator server: runs blueprints for remote clients and streams
//! their events.
//!
//! It owns the HTTP API ([`api`]), the SSE event stream ([`sse`]), the web UI (static
//! files embedded in the binary), the trusted blueprints directory ([`catalog`]),
//! authentication ([`auth`]) and the DNS-rebinding guard ([`host_guard`]), queueing
//! and executing runs ([`Server`], with the blueprint executor and the sandbox
//! backends of [`backends`]), and start-up recovery of runs a previous process left
//! unfinished ([`recovery`]). It does not own the event type or the run store
//! (`boitata-core`), blueprints (`boitata-blueprint`) or sandboxes
//! (`boitata-orchestrator`).
//!
//! # Example
//!
//! ```no_run
//! use boitata_server::{Server, ServerOptions};
//!
//! # async fn demo() -> Result<(), boitata_server::ServerError> {
//! let config = boitata_core::config::Config::default();
//! let mut options = ServerOptions::new("blueprints", "/var/lib/boitata", config);
//! options.bind = "127.0.0.1:0".parse().map_err(|_| unreachable!())?;
//! let server = Server::start(options).await?;
//! println!("listening on http://{}", server.local_addr());
//! server.serve(async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

#![deny(missing_docs)]

pub mod api;
pub mod auth;
pub mod backends;
pub mod catalog;
mod ended_runs;
mod error;
pub mod host_guard;
pub mod recovery;
mod request_log;
mod scheduler;
mod server;
pub mod sse;
mod state;
mod ui;

pub use backends::{Backends, OrphanReaper, ReapReport, SandboxReaper};
pub use catalog::{BlueprintCatalog, Rejected};
pub use error::{AppError, ErrorBody};
pub use server::{app, Server, ServerError, ServerOptions, DEFAULT_BIND, MAX_BODY_BYTES};
pub use state::AppState;
