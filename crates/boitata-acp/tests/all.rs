//! boitata-acp's integration tests, compiled as one binary (see `suite/`).
// Test helpers outside `#[test]` functions panic on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
