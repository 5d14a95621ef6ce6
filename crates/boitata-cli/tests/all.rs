//! The CLI's integration tests, compiled as one binary.
// Test helpers (commands, fixtures) may panic: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
