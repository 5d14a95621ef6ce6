#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod support;

mod api;
mod auth;
mod blueprint_names;
mod cancel;
mod crash_recovery;
mod rebinding;
mod run_stream;
mod sandbox;
mod secrets;
mod ui_browser;
