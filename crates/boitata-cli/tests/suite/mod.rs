mod blueprint_run;
mod blueprint_validate;
mod run_local;
mod sandbox_checkout;
mod sandbox_daemon;
mod sandbox_parallel;
mod sandbox_support;
mod sandbox_teardown;
