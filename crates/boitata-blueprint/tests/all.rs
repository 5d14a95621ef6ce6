//! The integration tests of boitata-blueprint, as one binary.

// Test helpers (fakes, harnesses) may panic: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
