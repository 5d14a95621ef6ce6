//! Integration tests of boitata-orchestrator, compiled as one binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
