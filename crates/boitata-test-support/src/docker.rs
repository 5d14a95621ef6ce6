//! Docker fixtures for tests that need a real daemon.
//!
//! They talk to the daemon through the `docker` CLI, not through Boitata's own
//! backend, so that tests check Boitata against an independent view.
//!
//! ```no_run
//! use boitata_test_support::docker;
//!
//! let Some(daemon) = docker::daemon("provision_exec_destroy") else { return };
//! daemon.ensure_base_image();
//! let run = daemon.run_scope("my-test"); // removes the run's containers on drop
//! // ... provision with run id `run.run_id()` ...
//! assert!(run.containers().is_empty());
//! ```
//!
//! Without a daemon, [`daemon`] prints why the test is skipped and returns `None`;
//! when the environment says `CI=true` it panics instead: CI must not skip these.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Mutex;

/// The image the sandbox tests run in, made by `scripts/build-base-image.sh`.
pub const BASE_IMAGE: &str = "boitata-base:bookworm";

/// The image with `boitata-agent` inside, made by `scripts/build-agent-image.sh`.
pub const AGENT_IMAGE: &str = "boitata-agent-rust:latest";

/// Label names, repeated here so the fixtures do not depend on the crate under test.
const LABEL_RUN_ID: &str = "boitata.run_id";
const LABEL_CREATED_BY: &str = "boitata.created_by";

/// A reachable Docker daemon.
#[derive(Debug, Clone, Copy)]
pub struct Daemon {
    _private: (),
}

/// Returns the daemon if `docker info` answers. Otherwise prints
/// `skipping TEST: …` and returns `None`, or panics when `CI=true`.
// Printing the reason a test skips is this helper's job.
#[allow(clippy::print_stderr)]
pub fn daemon(test: &str) -> Option<Daemon> {
    let reason = match Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
    {
        Ok(out) if out.status.success() => return Some(Daemon { _private: () }),
        Ok(out) => format!(
            "the Docker daemon does not answer: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("the docker CLI cannot run: {e}"),
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: CI=true and {reason}: Docker tests must not skip in CI");
    }
    eprintln!("skipping {test}: {reason}");
    None
}

/// Runs `docker ARGS…` and returns its output (whatever the exit status).
pub fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("docker {args:?}: {e}"))
}

/// Runs `docker ARGS…`, panics unless it succeeds, and returns its stdout.
pub fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(
        out.status.success(),
        "docker {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The repository root (where `scripts/` lives).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("cannot find the repository root: {e}"))
}

static IMAGE_BUILD: Mutex<()> = Mutex::new(());

impl Daemon {
    /// Makes sure [`BASE_IMAGE`] exists, running `scripts/build-base-image.sh` if not.
    pub fn ensure_base_image(&self) {
        let _one_at_a_time = IMAGE_BUILD.lock().unwrap_or_else(|p| p.into_inner());
        if docker(&["image", "inspect", BASE_IMAGE]).status.success() {
            return;
        }
        let script = repo_root().join("scripts/build-base-image.sh");
        let status = Command::new("bash")
            .arg(&script)
            .status()
            .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
        assert!(status.success(), "{} failed", script.display());
    }

    /// Makes sure [`AGENT_IMAGE`] exists and holds the current `boitata-agent`: runs
    /// `scripts/build-agent-image.sh`, which builds the agent (a debug build unless
    /// `BOITATA_AGENT_PROFILE` says otherwise) and rebuilds the image only when the
    /// binary changed.
    pub fn ensure_agent_image(&self) {
        let _one_at_a_time = IMAGE_BUILD.lock().unwrap_or_else(|p| p.into_inner());
        let script = repo_root().join("scripts/build-agent-image.sh");
        let profile = std::env::var("BOITATA_AGENT_PROFILE").unwrap_or_else(|_| "debug".to_owned());
        let out = Command::new("bash")
            .arg(&script)
            .env("BOITATA_AGENT_PROFILE", profile)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A fresh run id (`test-NAME-RANDOM`) whose containers are removed when the
    /// returned scope is dropped.
    pub fn run_scope(&self, name: &str) -> RunScope {
        let unique = format!(
            "{:x}{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        );
        RunScope::adopt(format!("test-{name}-{unique}"))
    }

    /// The `docker inspect` document of a container.
    pub fn inspect(&self, id: &str) -> serde_json::Value {
        let text = docker_ok(&["inspect", "--type", "container", id]);
        let mut docs: Vec<serde_json::Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("docker inspect {id}: {e}"));
        docs.pop()
            .unwrap_or_else(|| panic!("docker inspect {id}: empty answer"))
    }

    /// Whether a container with this id (or name) exists.
    pub fn container_exists(&self, id: &str) -> bool {
        docker(&["inspect", "--type", "container", id])
            .status
            .success()
    }
}

/// Ids of every container, running or not, with label `name=value`.
pub fn containers_with_label(name: &str, value: &str) -> Vec<String> {
    let filter = format!("label={name}={value}");
    docker_ok(&["ps", "-aq", "--no-trunc", "--filter", &filter])
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Ids of every container labelled as made by Boitata.
pub fn boitata_containers() -> Vec<String> {
    containers_with_label(LABEL_CREATED_BY, "boitata")
}

/// Removes every container with label `name=value`.
pub fn remove_with_label(name: &str, value: &str) {
    let ids = containers_with_label(name, value);
    if ids.is_empty() {
        return;
    }
    let mut args = vec!["rm", "-f", "-v"];
    args.extend(ids.iter().map(String::as_str));
    let _ = docker(&args);
}

/// A run id whose containers (label `boitata.run_id`) are removed on drop.
#[derive(Debug)]
pub struct RunScope {
    run_id: String,
}

impl RunScope {
    /// Takes charge of the containers of `run_id`.
    pub fn adopt(run_id: impl Into<String>) -> Self {
        RunScope {
            run_id: run_id.into(),
        }
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run's containers now.
    pub fn containers(&self) -> Vec<String> {
        containers_with_label(LABEL_RUN_ID, &self.run_id)
    }

    /// The names of the run's networks now.
    pub fn networks(&self) -> Vec<String> {
        let filter = format!("label={LABEL_RUN_ID}={}", self.run_id);
        docker_ok(&[
            "network",
            "ls",
            "--format",
            "{{.Name}}",
            "--filter",
            &filter,
        ])
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect()
    }

    /// The run's host rules now (`iptables -S INPUT` lines, both the nf_tables and the
    /// legacy variant, whose comment is `boitata-run-RUN`), each prefixed with the
    /// program that lists it.
    pub fn host_rules(&self) -> Vec<String> {
        let comment = format!("boitata-run-{}", self.run_id);
        let mut rules = Vec::new();
        for program in IPTABLES {
            let Ok(out) = Command::new(program)
                .args(["-w", "10", "-S", "INPUT"])
                .output()
            else {
                continue;
            };
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                if line.split_whitespace().any(|word| word == comment) {
                    rules.push(format!("{program}: {line}"));
                }
            }
        }
        rules
    }
}

/// The `iptables` variants host rules may be in.
const IPTABLES: [&str; 2] = ["iptables-nft", "iptables-legacy"];

impl Drop for RunScope {
    fn drop(&mut self) {
        remove_with_label(LABEL_RUN_ID, &self.run_id);
        for network in self.networks() {
            let _ = docker(&["network", "rm", &network]);
        }
        // Host rules the run left, and the chains they jump to.
        for rule in self.host_rules() {
            let Some((program, line)) = rule.split_once(": ") else {
                continue;
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            let mut delete = vec!["-w", "10", "-D"];
            delete.extend(words.iter().skip(1));
            let _ = Command::new(program).args(&delete).output();
            if let Some(chain) = words
                .windows(2)
                .find(|w| w[0] == "-j" && w[1].starts_with("BOITATA-"))
                .map(|w| w[1])
            {
                let _ = Command::new(program)
                    .args(["-w", "10", "-F", chain])
                    .output();
                let _ = Command::new(program)
                    .args(["-w", "10", "-X", chain])
                    .output();
            }
        }
    }
}
