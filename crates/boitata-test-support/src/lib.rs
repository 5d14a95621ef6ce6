//! Shared test helpers for Boitata's crates: real git repositories in temp dirs,
//! fake model servers, Docker fixtures. Test code only: helpers panic on failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

pub mod browser;
pub mod docker;
pub mod repo;
pub mod server;
