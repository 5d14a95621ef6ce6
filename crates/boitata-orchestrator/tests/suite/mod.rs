//! Tests against a real Docker daemon (skipped locally without one; failing under
//! `CI=true`), plus those that need no daemon at all.

mod agent_sandbox;
mod blueprint_runs;
mod docker_backend;
mod egress_proxy;
mod gateway;
mod network;
mod reaper;
mod tracking;

use std::sync::{Arc, Mutex};

use boitata_core::event::SinkError;
use boitata_core::{Emitter, Event, EventPayload, EventSink, Redactor};
use boitata_orchestrator::{DockerBackend, Network, Sandbox, SandboxId, SandboxSpec};
use boitata_test_support::docker::{self, Daemon, RunScope, BASE_IMAGE};

/// A daemon with the base image, a run scope that cleans up, and a backend.
fn setup(test: &str) -> Option<(Daemon, RunScope, DockerBackend)> {
    let daemon = docker::daemon(test)?;
    daemon.ensure_base_image();
    let scope = daemon.run_scope(test);
    Some((daemon, scope, DockerBackend::from_env()))
}

/// A sandbox on Docker's bridge, for tests of the backend alone (a run network is
/// made by `RunSandboxes`).
fn base_spec(scope: &RunScope) -> SandboxSpec {
    SandboxSpec::new(BASE_IMAGE, scope.run_id())
        .node("test")
        .network(Network::Bridge)
}

/// A sandbox on the run's own network (the default), for tests through `RunSandboxes`.
fn run_spec(scope: &RunScope) -> SandboxSpec {
    SandboxSpec::new(BASE_IMAGE, scope.run_id()).node("test")
}

async fn provision(backend: &DockerBackend, spec: &SandboxSpec) -> SandboxId {
    backend
        .provision(spec)
        .await
        .unwrap_or_else(|e| panic!("provision: {e}"))
}

/// Every event a run emitted, in order.
#[derive(Default)]
struct Events(Mutex<Vec<Event>>);

impl EventSink for Events {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

/// An `egress` event's `(host, port, allowed, reason, bytes_up, bytes_down)`.
type Egress = (String, u16, bool, String, u64, u64);

impl Events {
    /// Each event's kind and node.
    fn kinds(&self) -> Vec<(&'static str, Option<String>)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.payload.kind(), e.node.clone()))
            .collect()
    }

    /// The `egress` events.
    fn egress(&self) -> Vec<Egress> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match &e.payload {
                EventPayload::Egress {
                    host,
                    port,
                    allowed,
                    reason,
                    bytes_up,
                    bytes_down,
                } => Some((
                    host.clone(),
                    *port,
                    *allowed,
                    reason.clone(),
                    *bytes_up,
                    *bytes_down,
                )),
                _ => None,
            })
            .collect()
    }
}

/// An emitter for run `run_id` recording its events.
fn emitter(run_id: &str) -> (Emitter, Arc<Events>) {
    let events = Arc::new(Events::default());
    (
        Emitter::new(run_id, Some(events.clone()), Redactor::default()),
        events,
    )
}
