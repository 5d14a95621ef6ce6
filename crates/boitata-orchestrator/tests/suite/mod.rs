//! Tests against a real Docker daemon (skipped locally without one; failing under
//! `CI=true`), plus those that need no daemon at all.

mod agent_sandbox;
mod blueprint_runs;
mod docker_backend;
mod gateway;
mod reaper;
mod tracking;

use boitata_orchestrator::{DockerBackend, Sandbox, SandboxId, SandboxSpec};
use boitata_test_support::docker::{self, Daemon, RunScope, BASE_IMAGE};

/// A daemon with the base image, a run scope that cleans up, and a backend.
fn setup(test: &str) -> Option<(Daemon, RunScope, DockerBackend)> {
    let daemon = docker::daemon(test)?;
    daemon.ensure_base_image();
    let scope = daemon.run_scope(test);
    Some((daemon, scope, DockerBackend::from_env()))
}

fn base_spec(scope: &RunScope) -> SandboxSpec {
    SandboxSpec::new(BASE_IMAGE, scope.run_id()).node("test")
}

async fn provision(backend: &DockerBackend, spec: &SandboxSpec) -> SandboxId {
    backend
        .provision(spec)
        .await
        .unwrap_or_else(|e| panic!("provision: {e}"))
}
