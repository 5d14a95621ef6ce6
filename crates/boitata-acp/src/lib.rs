//! Boitata over the [Agent Client Protocol](https://agentclientprotocol.com/) (ACP), on
//! the official `agent-client-protocol` crate: newline-delimited JSON-RPC, protocol v1,
//! over any byte stream (TCP, stdio).
//!
//! It owns:
//! - the agent side, [`serve`] / [`AcpServer`]: Boitata's agent (built by
//!   [`boitata_core::runtime::Runtime`]) as an ACP agent, with a per-run secret that
//!   must be presented before any session starts;
//! - the client side, [`run_prompt`]: one prompt turn on an agent, its events handed to
//!   a callback in order, its final message and stop reason returned;
//! - the `_meta.boitata` encoding ([`meta`]) and the event → `session/update` mapping
//!   ([`update`]): every update carries the Boitata [`Event`](boitata_core::Event) it
//!   reports.
//!
//! It does not own the agent loop, tools or providers (`boitata-core`), the
//! `boitata-agent` binary, or the sandbox node that launches it (`boitata-orchestrator`).
//!
//! # Example
//!
//! An agent on a TCP port, and one turn driven on it:
//!
//! ```no_run
//! # async fn example(runtime: boitata_core::runtime::Runtime) -> Result<(), boitata_acp::AcpError> {
//! use boitata_acp::{run_prompt_at, AcpServer, Prompt, StopReason};
//! use tokio_util::sync::CancellationToken;
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let server = AcpServer::new(runtime, std::path::Path::new("/work/repo"))?
//!     .with_secret(Some("per-run-secret".into()));
//! tokio::spawn(async move { server.serve_tcp(listener).await });
//!
//! let prompt = Prompt::new("make the tests pass", "/work/repo").secret("per-run-secret");
//! let outcome = run_prompt_at(addr, prompt, |event| println!("{}", event.to_json_line()),
//!     CancellationToken::new()).await?;
//! assert_eq!(outcome.stop_reason, StopReason::EndTurn);
//! println!("{}", outcome.final_message);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod client;
mod error;
mod limits;
pub mod meta;
mod secret;
mod server;
pub mod update;
mod wire;

pub use client::{
    connect, run_prompt, run_prompt_at, wait_ready, Prompt, PromptOutcome, StopReason,
    DEFAULT_CANCEL_GRACE,
};
pub use error::AcpError;
pub use limits::{AUTH_TIMEOUT, MAX_CONNECTIONS, MAX_LINE_BYTES};
pub use meta::{AUTH_METHOD_ID, META_KEY};
pub use server::{serve, AcpServer, TURN_SHUTDOWN_GRACE};
pub use wire::MAX_ECHO_BYTES;
