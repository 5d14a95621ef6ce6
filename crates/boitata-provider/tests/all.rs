//! boitata-provider's integration tests, compiled as one binary (see `suite/`).

// Everything in this binary is test code, helpers included (clippy's
// `allow-unwrap-in-tests` only covers `#[test]` functions themselves).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
