//! boitata-agent's integration tests, compiled as one binary (see `suite/`): the real
//! binary, started as a process, driven over TCP and stdio by `boitata_acp::run_prompt`
//! and by the official ACP Python SDK.
// Test helpers outside `#[test]` functions panic on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod suite;
