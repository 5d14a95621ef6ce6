//! Real TCP connections between `boitata_acp::serve` and `run_prompt` (or a raw
//! line-by-line JSON-RPC client), with a fake model provider.

mod auth;
mod cancel;
mod connection;
mod limits;
mod redaction;
mod round_trip;
mod session_cwd;
mod support;
