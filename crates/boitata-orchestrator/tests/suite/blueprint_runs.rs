//! Sandbox nodes through the real blueprint executor, against the real daemon.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use boitata_blueprint::{
    Blueprint, Executor, HandlerKind, Node, NodeContext, NodeError, NodeHandler, NodeHandlers,
    NodeOutcome, RunReport, RunRequest, RuntimeSource,
};
use boitata_core::config::Config;
use boitata_core::event::SinkError;
use boitata_core::{Emitter, Event, EventPayload, EventSink, Redactor, RunStatus};
use boitata_orchestrator::{needs_sandbox, DockerBackend, SandboxNodes};
use boitata_test_support::docker::{self, RunScope};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Recorder(Mutex<Vec<Event>>);

impl EventSink for Recorder {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

struct Run {
    scope: RunScope,
    recorder: Arc<Recorder>,
    cancel: CancellationToken,
    workspace: tempfile::TempDir,
    executor: Executor,
}

fn blueprint(yaml: &str) -> Blueprint {
    match boitata_blueprint::parse(yaml, "test.yaml") {
        Ok(v) => v.blueprint,
        Err(d) => panic!("invalid blueprint:\n{}", d.render(100)),
    }
}

fn executor(
    backend: DockerBackend,
    extra: Option<(HandlerKind, Arc<dyn NodeHandler>)>,
) -> Executor {
    let sandboxes = SandboxNodes::new(Arc::new(backend));
    let mut handlers = NodeHandlers::host();
    sandboxes.register(&mut handlers);
    if let Some((kind, handler)) = extra {
        handlers.register(kind, handler);
    }
    Executor::new(handlers).with_hook(sandboxes.hook())
}

impl Run {
    fn new(test: &str) -> Option<Run> {
        let daemon = docker::daemon(test)?;
        daemon.ensure_base_image();
        Some(Run::with_executor(
            daemon.run_scope(test),
            executor(DockerBackend::from_env(), None),
        ))
    }

    fn with_executor(scope: RunScope, executor: Executor) -> Run {
        Run {
            scope,
            recorder: Arc::new(Recorder::default()),
            cancel: CancellationToken::new(),
            workspace: tempfile::tempdir().unwrap(),
            executor,
        }
    }

    async fn run(&self, yaml: &str) -> RunReport {
        let emitter = Emitter::new(
            self.scope.run_id(),
            Some(self.recorder.clone()),
            Redactor::default(),
        );
        let request = RunRequest {
            task: "the task".into(),
            params: BTreeMap::new(),
            workspace: self.workspace.path().to_path_buf(),
            runtime: RuntimeSource::Config {
                config: Config::default(),
                env: Arc::new(BTreeMap::<String, String>::new()),
            },
            emitter,
            cancel: self.cancel.clone(),
        };
        self.executor.run(&blueprint(yaml), request).await.unwrap()
    }

    fn events(&self) -> Vec<Event> {
        self.recorder.0.lock().unwrap().clone()
    }

    fn kinds(&self) -> Vec<&'static str> {
        self.events().iter().map(|e| e.payload.kind()).collect()
    }

    fn stdout_of(&self, node: &str) -> String {
        self.events()
            .iter()
            .filter(|e| e.node.as_deref() == Some(node))
            .filter_map(|e| match &e.payload {
                EventPayload::ExecOutput {
                    stream: boitata_core::OutputStream::Stdout,
                    chunk,
                } => Some(chunk.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Every sandbox the run provisioned was destroyed, with an event each, and
    /// nothing with its label is left.
    fn assert_torn_down(&self) {
        let events = self.events();
        let made: Vec<String> = events
            .iter()
            .filter_map(|e| match &e.payload {
                EventPayload::SandboxProvisioned { sandbox_id, .. } => Some(sandbox_id.clone()),
                _ => None,
            })
            .collect();
        let destroyed: Vec<String> = events
            .iter()
            .filter_map(|e| match &e.payload {
                EventPayload::SandboxDestroyed { sandbox_id } => Some(sandbox_id.clone()),
                _ => None,
            })
            .collect();
        assert!(!made.is_empty(), "no sandbox was provisioned");
        let mut a = made.clone();
        let mut b = destroyed.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "provisioned {made:?}, destroyed {destroyed:?}");
        assert_eq!(
            self.kinds().last(),
            Some(&"run_finished"),
            "sandbox_destroyed comes before run_finished"
        );
        assert!(
            self.scope.containers().is_empty(),
            "left behind: {:?}",
            self.scope.containers()
        );
    }
}

const ROUTING: &str = r#"
name: routing
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm" }
  hello: { type: exec, container: "{box}", command: "echo hello from $(cat /etc/debian_version | cut -c1-2) in $BOITATA_NODE; echo to-stderr >&2" }
  three: { type: exec, container: "{box}", command: "exit 3" }
  took3: { type: exec, container: "{box}", command: "echo took the 3 edge" }
  other: { type: exec, container: "{box}", command: "echo wrong edge; exit 1" }
edges:
  - { from: box, to: hello }
  - { from: hello, when: success, to: three }
  - { from: three, when: 0, to: other }
  - { from: three, when: 3, to: took3 }
  - { from: three, to: other }
  - { from: took3, to: END }
"#;

#[tokio::test]
async fn provision_exec_and_exit_code_routing_then_teardown() {
    let Some(run) = Run::new("bp_routing") else {
        return;
    };
    let report = run.run(ROUTING).await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let path: Vec<&str> = report.steps.iter().map(|s| s.node.as_str()).collect();
    assert_eq!(path, ["box", "hello", "three", "took3"]);
    assert_eq!(report.steps[2].exit_code, Some(3));
    assert_eq!(report.outputs["hello"], "hello from 12 in hello\n");
    assert_eq!(report.outputs["took3"], "took the 3 edge\n");
    assert_eq!(run.stdout_of("hello"), "hello from 12 in hello\n");
    assert!(
        report.outputs["box"].len() >= 12,
        "{:?}",
        report.outputs["box"]
    );
    let kinds = run.kinds();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "sandbox_provisioned")
            .count(),
        1
    );
    assert!(kinds.contains(&"exec_output"));
    run.assert_torn_down();
}

#[tokio::test]
async fn a_failed_run_is_torn_down() {
    let Some(run) = Run::new("bp_failure") else {
        return;
    };
    let report = run
        .run(
            r#"
name: fails
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm", network: none, memory: 256m, pids: 100, cpus: 1 }
  fail: { type: exec, container: "{box}", command: "echo failing; exit 7" }
edges:
  - { from: box, to: fail }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed, "{report:?}");
    assert_eq!(report.steps[1].exit_code, Some(7));
    run.assert_torn_down();
}

#[tokio::test]
async fn cancelling_during_a_long_exec_stops_it_and_tears_down() {
    let Some(run) = Run::new("bp_cancel") else {
        return;
    };
    let cancel = run.cancel.clone();
    let recorder = run.recorder.clone();
    // Cancel as soon as the long command is running.
    let watcher = tokio::spawn(async move {
        loop {
            let started = recorder.0.lock().unwrap().iter().any(|e| {
                e.node.as_deref() == Some("long")
                    && matches!(e.payload, EventPayload::ExecOutput { .. })
            });
            if started {
                cancel.cancel();
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let started = std::time::Instant::now();
    let report = run
        .run(
            r#"
name: cancelled
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm" }
  long: { type: exec, container: "{box}", command: "echo sleeping; sleep 1000" }
edges:
  - { from: box, to: long }
"#,
        )
        .await;
    watcher.await.unwrap();
    assert_eq!(report.status, RunStatus::Cancelled, "{report:?}");
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "cancellation hung"
    );
    run.assert_torn_down();
}

#[tokio::test]
async fn a_node_timeout_kills_the_command_inside_and_failure_edges_route_on() {
    let Some(run) = Run::new("bp_timeout") else {
        return;
    };
    let report = run
        .run(
            r#"
name: timeout
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm" }
  slow: { type: exec, container: "{box}", command: "sleep 1001 & echo started; sleep 1002", timeout: 2s }
  check:
    type: exec
    container: "{box}"
    command: "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline; echo; done | grep -E 'sleep 100[1-2]' || echo none-left"
edges:
  - { from: box, to: slow }
  - { from: slow, when: failure, to: check }
"#,
        )
        .await;
    let path: Vec<&str> = report.steps.iter().map(|s| s.node.as_str()).collect();
    assert_eq!(path, ["box", "slow", "check"], "{report:?}");
    assert!(
        report.steps[1]
            .error
            .as_deref()
            .unwrap_or("")
            .contains("timed out"),
        "{report:?}"
    );
    assert_eq!(report.outputs["check"], "none-left\n");
    assert_eq!(report.status, RunStatus::Succeeded);
    run.assert_torn_down();
}

/// A handler that panics after the sandbox exists.
struct Panics;

#[async_trait]
impl NodeHandler for Panics {
    async fn run(&self, _node: &Node, _ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
        panic!("agent exploded");
    }
}

#[tokio::test]
async fn a_panicking_node_still_gets_its_run_torn_down() {
    let Some(daemon) = docker::daemon("bp_panic") else {
        return;
    };
    daemon.ensure_base_image();
    let run = Run::with_executor(
        daemon.run_scope("bp_panic"),
        executor(
            DockerBackend::from_env(),
            Some((HandlerKind::AgentSandbox, Arc::new(Panics))),
        ),
    );
    let report = run
        .run(
            r#"
name: panics
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm" }
  work: { type: agent_sandbox, container: "{box}", prompt: "go" }
edges:
  - { from: box, to: work }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    assert!(
        report.error.as_deref().unwrap_or("").contains("panicked"),
        "{report:?}"
    );
    run.assert_torn_down();
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        // `git status` must not refresh the index: the test watches its mtime.
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with two commits on `main` and a `feature` branch, checked out on
/// `main`, plus an uncommitted change.
fn host_repo(root: &Path) -> std::path::PathBuf {
    let repo = root.join("host repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README"), "one\n").unwrap();
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    git(&repo, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(repo.join("feature.txt"), "f\n").unwrap();
    git(&repo, &["add", "feature.txt"]);
    git(&repo, &["commit", "-q", "-m", "feature work"]);
    git(&repo, &["checkout", "-q", "main"]);
    std::fs::write(repo.join("README"), "one\ntwo\n").unwrap();
    git(&repo, &["commit", "-q", "-am", "second"]);
    std::fs::write(repo.join("README"), "uncommitted\n").unwrap();
    repo
}

/// Everything observable about a repository: HEAD, refs, status, and every file
/// under .git with its size and modification time.
fn repo_state(repo: &Path) -> String {
    let mut state = vec![
        git(repo, &["rev-parse", "HEAD"]),
        git(repo, &["symbolic-ref", "HEAD"]),
        git(repo, &["for-each-ref"]),
        git(repo, &["status", "--porcelain"]),
    ];
    let mut stack = vec![repo.join(".git")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                state.push(format!(
                    "{} {} {:?}",
                    entry.path().display(),
                    meta.len(),
                    meta.modified().ok()
                ));
            }
        }
    }
    state.sort();
    state.join("\n")
}

fn checkout_blueprint(repo: &str, git_ref: Option<&str>) -> String {
    let git_ref = git_ref.map(|r| format!(", ref: {r}")).unwrap_or_default();
    format!(
        r#"
name: checkout
entry: box
nodes:
  box: {{ type: provision, image: "boitata-base:bookworm", network: none }}
  code: {{ type: checkout, container: "{{box}}", repo: "{repo}"{git_ref} }}
  log: {{ type: exec, container: "{{box}}", command: "cd /workspace && git log -1 --format=%H && git branch --show-current && cat README" }}
edges:
  - {{ from: box, to: code }}
  - {{ from: code, when: success, to: log }}
"#
    )
}

#[tokio::test]
async fn checkout_of_a_host_path_and_a_file_url_matches_the_host_commit() {
    let Some(daemon) = docker::daemon("bp_checkout") else {
        return;
    };
    daemon.ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let repo = host_repo(tmp.path());
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let feature = git(&repo, &["rev-parse", "feature"]);
    let before = repo_state(&repo);

    let file_url = format!("file://{}", repo.display().to_string().replace(' ', "%20"));
    let cases = [
        (
            repo.display().to_string(),
            None,
            head.clone(),
            "main",
            "one\ntwo\n",
        ),
        (file_url, None, head.clone(), "main", "one\ntwo\n"),
        (
            repo.display().to_string(),
            Some("feature"),
            feature.clone(),
            "feature",
            "one\n",
        ),
    ];
    for (source, git_ref, commit, branch, readme) in cases {
        let run = Run::with_executor(
            daemon.run_scope("bp_checkout"),
            executor(DockerBackend::from_env(), None),
        );
        let report = run.run(&checkout_blueprint(&source, git_ref)).await;
        assert_eq!(
            report.status,
            RunStatus::Succeeded,
            "{source}: {report:?}\n{:#?}",
            run.events()
        );
        assert_eq!(
            report.outputs["code"],
            format!("/workspace {commit}"),
            "{source}"
        );
        assert_eq!(
            report.outputs["log"],
            format!("{commit}\n{branch}\n{readme}"),
            "{source} {git_ref:?}"
        );
        run.assert_torn_down();
    }
    assert_eq!(repo_state(&repo), before, "the host repository changed");
}

/// Serves the bare repository `bare` over git's "dumb" HTTP protocol (plain files) on
/// loopback; its URL.
async fn serve_dumb_http(bare: &Path) -> (wiremock::MockServer, String) {
    git(bare, &["update-server-info"]);
    let server = wiremock::MockServer::start().await;
    let mut stack = vec![bare.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let relative = path
                .strip_prefix(bare)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            wiremock::Mock::given(wiremock::matchers::path(format!("/repo.git/{relative}")))
                .respond_with(
                    wiremock::ResponseTemplate::new(200)
                        .set_body_bytes(std::fs::read(&path).unwrap())
                        .insert_header("content-type", "application/octet-stream"),
                )
                .mount(&server)
                .await;
        }
    }
    let url = format!("http://127.0.0.1:{}/repo.git", server.address().port());
    (server, url)
}

#[tokio::test]
async fn checkout_of_a_url_is_fetched_on_the_host_so_a_sandbox_without_network_gets_it() {
    let Some(daemon) = docker::daemon("bp_checkout_url") else {
        return;
    };
    daemon.ensure_base_image();
    let tmp = tempfile::tempdir().unwrap();
    let repo = host_repo(tmp.path());
    let head = git(&repo, &["rev-parse", "HEAD"]);
    let bare = tmp.path().join("served.git");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            repo.to_str().unwrap(),
            "served.git",
        ],
    );
    let (server, url) = serve_dumb_http(&bare).await;

    // The sandbox has no network at all (and the server is on the host's loopback):
    // only a fetch on the host can get the code in.
    let run = Run::with_executor(
        daemon.run_scope("bp_checkout_url"),
        executor(DockerBackend::from_env(), None),
    );
    let report = run.run(&checkout_blueprint(&url, None)).await;
    assert_eq!(
        report.status,
        RunStatus::Succeeded,
        "{report:?}\n{:#?}",
        run.events()
    );
    assert_eq!(report.outputs["code"], format!("/workspace {head}"));
    assert_eq!(report.outputs["log"], format!("{head}\nmain\none\ntwo\n"));
    assert!(!server.received_requests().await.unwrap().is_empty());
    run.assert_torn_down();

    // A URL that cannot be cloned fails the node saying so.
    let run = Run::with_executor(
        daemon.run_scope("bp_checkout_bad_url"),
        executor(DockerBackend::from_env(), None),
    );
    let missing = format!("http://127.0.0.1:{}/missing.git", server.address().port());
    let report = run.run(&checkout_blueprint(&missing, None)).await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = format!("{:?}", run.events());
    assert!(error.contains("git clone on the host failed"), "{error}");
    run.assert_torn_down();
}

#[tokio::test]
async fn checkout_of_a_path_that_is_not_a_repository_fails_clearly() {
    let Some(run) = Run::new("bp_checkout_bad") else {
        return;
    };
    let report = run
        .run(&checkout_blueprint("/nonexistent/boitata/repo", None))
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.unwrap_or_default();
    assert!(error.contains("/nonexistent/boitata/repo"), "{error}");
    assert!(error.contains("no such directory"), "{error}");
    run.assert_torn_down();
}

#[tokio::test]
async fn a_node_cannot_use_a_container_its_run_did_not_provision() {
    let Some(daemon) = docker::daemon("bp_foreign") else {
        return;
    };
    daemon.ensure_base_image();
    let other = daemon.run_scope("bp_foreign_other");
    let backend = DockerBackend::from_env();
    let foreign = boitata_orchestrator::Sandbox::provision(
        &backend,
        &boitata_orchestrator::SandboxSpec::new(docker::BASE_IMAGE, other.run_id())
            .network(boitata_orchestrator::Network::Bridge),
    )
    .await
    .unwrap();
    let run = Run::with_executor(daemon.run_scope("bp_foreign"), executor(backend, None));
    let yaml = format!(
        r#"
name: foreign
entry: box
nodes:
  box: {{ type: provision, image: "boitata-base:bookworm" }}
  sneak: {{ type: exec, container: "{foreign}", command: "touch /tmp/owned" }}
edges:
  - {{ from: box, to: sneak }}
"#
    );
    let report = run.run(&yaml).await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.unwrap_or_default();
    assert!(error.contains("is not a sandbox of this run"), "{error}");
    run.assert_torn_down();
    assert_eq!(
        other.containers().len(),
        1,
        "the other run's sandbox is untouched"
    );
}

#[tokio::test]
async fn a_host_only_blueprint_runs_without_any_daemon() {
    // No daemon needed, or touched: the backend points at a socket that does not exist.
    let backend = DockerBackend::with_host("unix:///nonexistent/boitata-test/docker.sock");
    let run = Run::with_executor(RunScope::adopt("host-only"), executor(backend, None));
    let yaml = r#"
name: host_only
entry: hello
nodes:
  hello: { type: exec, command: "echo on the host" }
"#;
    assert!(!needs_sandbox(&blueprint(yaml)));
    assert!(needs_sandbox(&blueprint(ROUTING)));
    let report = run.run(yaml).await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    assert_eq!(report.outputs["hello"], "on the host\n");
    std::mem::forget(run.scope); // nothing to clean, and no docker CLI needed
}

#[tokio::test]
async fn a_sandbox_blueprint_without_a_daemon_fails_with_the_clear_line() {
    let backend = DockerBackend::with_host("unix:///nonexistent/boitata-test/docker.sock");
    let run = Run::with_executor(RunScope::adopt("no-daemon"), executor(backend, None));
    let report = run.run(ROUTING).await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.unwrap_or_default();
    assert!(
        error.contains(
            "cannot reach the Docker daemon at unix:///nonexistent/boitata-test/docker.sock"
        ),
        "{error}"
    );
    assert!(!run.kinds().contains(&"sandbox_destroyed"));
    std::mem::forget(run.scope);
}

#[tokio::test]
async fn sandbox_exec_runs_in_its_workdir_which_must_be_absolute() {
    let Some(run) = Run::new("bp_workdir") else {
        return;
    };
    let report = run
        .run(
            r#"
name: workdir
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm", network: none }
  here: { type: exec, container: "{box}", command: "pwd" }
  tmp: { type: exec, container: "{box}", command: "pwd", workdir: /tmp }
  relative: { type: exec, container: "{box}", command: "pwd", workdir: tmp }
edges:
  - { from: box, to: here }
  - { from: here, to: tmp }
  - { from: tmp, to: relative }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    assert_eq!(report.outputs["here"], "/workspace\n");
    assert_eq!(report.outputs["tmp"], "/tmp\n");
    let error = report.error.unwrap_or_default();
    assert!(
        error.contains(
            "node \"relative\": workdir \"tmp\" is not an absolute path inside the sandbox"
        ),
        "{error}"
    );
    run.assert_torn_down();
}

#[tokio::test]
async fn sandbox_exec_in_a_missing_workdir_fails_the_node() {
    let Some(run) = Run::new("bp_workdir_missing") else {
        return;
    };
    let report = run
        .run(
            r#"
name: workdir
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm", network: none }
  nowhere: { type: exec, container: "{box}", command: "echo ran", workdir: /no/such/dir }
edges:
  - { from: box, to: nowhere }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed, "{report:?}");
    assert!(!report
        .outputs
        .get("nowhere")
        .is_some_and(|o| o.contains("ran")));
    let events = run.events();
    let finished = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::NodeFinished {
                error,
                output_preview,
                ..
            } if e.node.as_deref() == Some("nowhere") => {
                Some(format!("{error:?} {output_preview}"))
            }
            _ => None,
        })
        .unwrap();
    assert!(finished.contains("/no/such/dir"), "{finished}");
    run.assert_torn_down();
}
