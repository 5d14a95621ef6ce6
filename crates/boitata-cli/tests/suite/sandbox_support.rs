//! Shared pieces of the `sandbox_*` tests: the binary with a clean environment, a
//! home with blueprints, events read from `--json` output, and the daemon fixtures.

use std::io::{BufRead, BufReader, Lines};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command as StdCommand, Stdio};

use assert_cmd::Command;
use boitata_core::{Event, EventPayload};
use boitata_test_support::docker::{self, RunScope};

/// A temp home (config, data dir, blueprints) for one test.
pub(super) struct Home {
    pub(super) dir: tempfile::TempDir,
}

impl Home {
    pub(super) fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a blueprint file and returns its path.
    pub(super) fn blueprint(&self, name: &str, yaml: &str) -> PathBuf {
        let path = self.path().join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        path
    }

    /// `boitata` with only PATH, HOME and the data dir set (and `DOCKER_HOST` if
    /// this process has one).
    pub(super) fn boitata(&self) -> Command {
        let mut cmd = Command::cargo_bin("boitata").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("BOITATA_DATA_DIR", self.path().join("data"))
            .current_dir(self.path());
        if let Ok(host) = std::env::var("DOCKER_HOST") {
            cmd.env("DOCKER_HOST", host);
        }
        cmd
    }

    /// The same, as a child process whose `--json` stdout is read line by line.
    pub(super) fn spawn(&self, args: &[&str]) -> (Child, Lines<BufReader<ChildStdout>>) {
        self.spawn_with_env(args, &[])
    }

    /// Where a [`Home::spawn`]ed child's stderr goes.
    pub(super) fn stderr_path(&self) -> PathBuf {
        self.path().join("boitata.stderr")
    }

    /// What a [`Home::spawn`]ed child wrote on stderr so far.
    pub(super) fn stderr(&self) -> String {
        std::fs::read_to_string(self.stderr_path()).unwrap_or_default()
    }

    /// [`Home::spawn`] with `env` added to the child's environment.
    pub(super) fn spawn_with_env(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Child, Lines<BufReader<ChildStdout>>) {
        let mut cmd = StdCommand::new(assert_cmd::cargo::cargo_bin("boitata"));
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("BOITATA_DATA_DIR", self.path().join("data"))
            .current_dir(self.path())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(self.stderr_path()).unwrap());
        if let Ok(host) = std::env::var("DOCKER_HOST") {
            cmd.env("DOCKER_HOST", host);
        }
        cmd.envs(env.iter().copied());
        let mut child = cmd.spawn().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        (child, lines)
    }
}

/// A daemon with the base image, or `None` (skip, or panic under CI=true).
pub(super) fn daemon(test: &str) -> Option<docker::Daemon> {
    let daemon = docker::daemon(test)?;
    daemon.ensure_base_image();
    Some(daemon)
}

/// A daemon with the base image and the agent image (`boitata-agent-rust:latest`,
/// holding the current `boitata-agent`), or `None` (skip, or panic under CI=true).
pub(super) fn agent_daemon(test: &str) -> Option<docker::Daemon> {
    let daemon = daemon(test)?;
    daemon.ensure_agent_image();
    Some(daemon)
}

/// Events from `--json` output.
pub(super) fn events(stdout: &[u8]) -> Vec<Event> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Reads events until one matches `until` (included); panics if output ends first.
pub(super) fn read_until(
    lines: &mut Lines<BufReader<ChildStdout>>,
    seen: &mut Vec<Event>,
    until: impl Fn(&Event) -> bool,
) {
    if !try_read_until(lines, seen, until) {
        panic!("output ended before the expected event: {seen:#?}");
    }
}

/// Like [`read_until`], but returns false when the output ends first.
pub(super) fn try_read_until(
    lines: &mut Lines<BufReader<ChildStdout>>,
    seen: &mut Vec<Event>,
    until: impl Fn(&Event) -> bool,
) -> bool {
    for line in lines.by_ref() {
        let event: Event = serde_json::from_str(&line.unwrap()).unwrap();
        let done = until(&event);
        seen.push(event);
        if done {
            return true;
        }
    }
    false
}

/// The sandbox ids provisioned and destroyed, per the events.
pub(super) fn sandbox_events(events: &[Event]) -> (Vec<String>, Vec<String>) {
    let mut made = Vec::new();
    let mut destroyed = Vec::new();
    for e in events {
        match &e.payload {
            EventPayload::SandboxProvisioned { sandbox_id, .. } => made.push(sandbox_id.clone()),
            EventPayload::SandboxDestroyed { sandbox_id } => destroyed.push(sandbox_id.clone()),
            _ => {}
        }
    }
    (made, destroyed)
}

/// Asserts that the run provisioned sandboxes, destroyed each (with an event, before
/// `run_finished`), and that none with its label is left. Returns the cleanup scope.
pub(super) fn assert_torn_down(events: &[Event]) -> RunScope {
    let run_id = &events.first().expect("no events").run_id;
    let scope = RunScope::adopt(run_id.clone());
    let (mut made, mut destroyed) = sandbox_events(events);
    assert!(!made.is_empty(), "no sandbox was provisioned: {events:#?}");
    made.sort();
    destroyed.sort();
    assert_eq!(
        made, destroyed,
        "every sandbox gets a sandbox_destroyed event"
    );
    assert_eq!(events.last().unwrap().payload.kind(), "run_finished");
    assert_eq!(
        scope.containers(),
        Vec::<String>::new(),
        "containers left behind"
    );
    scope
}
