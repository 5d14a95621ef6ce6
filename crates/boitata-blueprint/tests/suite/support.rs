//! Helpers for driving blueprint runs in tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use boitata_blueprint::{Blueprint, Executor, NodeHandlers, RunReport, RunRequest, RuntimeSource};
use boitata_core::config::Config;
use boitata_core::event::{EventSink, SinkError};
use boitata_core::{Emitter, Event, EventPayload, Redactor};
use tokio_util::sync::CancellationToken;

/// Parses a blueprint that must be valid.
pub(super) fn blueprint(yaml: &str) -> Blueprint {
    match boitata_blueprint::parse(yaml, "test.yaml") {
        Ok(v) => v.blueprint,
        Err(d) => panic!("invalid blueprint:\n{}", d.render(100)),
    }
}

/// Records every event.
#[derive(Default)]
pub(super) struct Recorder(pub(super) Mutex<Vec<Event>>);

impl EventSink for Recorder {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

impl Recorder {
    pub(super) fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

/// A run in a fresh temp workspace.
pub(super) struct Harness {
    pub(super) workspace: tempfile::TempDir,
    pub(super) recorder: Arc<Recorder>,
    pub(super) emitter: Emitter,
    pub(super) cancel: CancellationToken,
    pub(super) runtime: RuntimeSource,
    pub(super) params: BTreeMap<String, String>,
}

impl Harness {
    pub(super) fn new() -> Self {
        let recorder = Arc::new(Recorder::default());
        let emitter = Emitter::new("run-1", Some(recorder.clone()), Redactor::default());
        let env: BTreeMap<String, String> = ["PATH", "HOME"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
            .collect();
        Harness {
            workspace: tempfile::tempdir().unwrap(),
            recorder,
            emitter,
            cancel: CancellationToken::new(),
            runtime: RuntimeSource::Config {
                config: Config::default(),
                env: Arc::new(env),
            },
            params: BTreeMap::new(),
        }
    }

    pub(super) fn request(&self, task: &str) -> RunRequest {
        RunRequest {
            task: task.to_owned(),
            params: self.params.clone(),
            workspace: self.workspace.path().to_path_buf(),
            runtime: self.runtime.clone(),
            emitter: self.emitter.clone(),
            cancel: self.cancel.clone(),
        }
    }

    /// Runs `yaml` with the host handlers.
    pub(super) async fn run(&self, yaml: &str) -> RunReport {
        self.run_with(Executor::new(NodeHandlers::host()), yaml)
            .await
    }

    pub(super) async fn run_with(&self, executor: Executor, yaml: &str) -> RunReport {
        executor
            .run(&blueprint(yaml), self.request("the task"))
            .await
            .unwrap()
    }
}

/// The nodes run, in order.
pub(super) fn path(report: &RunReport) -> Vec<&str> {
    report.steps.iter().map(|s| s.node.as_str()).collect()
}

/// The `run_finished` payload, which must be the last event.
pub(super) fn run_finished(events: &[Event]) -> EventPayload {
    let last = events.last().expect("no events");
    assert_eq!(last.payload.kind(), "run_finished", "{events:#?}");
    last.payload.clone()
}

/// Live (non-zombie) processes in process group `pgid`, from /proc.
pub(super) fn live_processes_in_group(pgid: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...; comm may hold spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            pids.push(pid);
        }
    }
    pids
}
