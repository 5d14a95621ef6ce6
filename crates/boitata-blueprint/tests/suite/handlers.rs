//! The node-handler interface as another crate uses it: registering handlers for the
//! sandbox kinds, cleanup on every run end, hooks, panics, missing handlers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use boitata_blueprint::{
    Executor, HandlerKind, Node, NodeContext, NodeError, NodeHandler, NodeHandlers, NodeOutcome,
    NodeSpec, RunEnding, RunHooks,
};
use boitata_core::{EventPayload, RunStatus};

use super::support::{blueprint, path, run_finished, Harness};

/// A fake sandbox backend: `provision` "creates" a sandbox and registers its
/// destruction; `exec` in a container records the command it was given.
#[derive(Default)]
struct FakeSandbox {
    created: AtomicUsize,
    destroyed: Arc<AtomicUsize>,
    commands: Mutex<Vec<String>>,
}

struct Provision(Arc<FakeSandbox>);

#[async_trait]
impl NodeHandler for Provision {
    async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
        let NodeSpec::Provision(spec) = &node.spec else {
            return Err(NodeError::Invalid("not a provision node".into()));
        };
        if spec.network.as_deref() == Some("host") {
            // As the Docker provision handler words it: naming its node.
            return Err(NodeError::Invalid(format!(
                "node {:?}: network \"host\" is not supported: use bridge or none",
                node.id
            )));
        }
        let n = self.0.created.fetch_add(1, Ordering::SeqCst);
        let id = format!("sandbox-{n}-{}", spec.image);
        let destroyed = self.0.destroyed.clone();
        ctx.teardown().defer(format!("destroy {id}"), async move {
            destroyed.fetch_add(1, Ordering::SeqCst);
        });
        Ok(NodeOutcome::success(id))
    }
}

struct SandboxExec(Arc<FakeSandbox>);

#[async_trait]
impl NodeHandler for SandboxExec {
    async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
        let NodeSpec::Exec(spec) = &node.spec else {
            return Err(NodeError::Invalid("not an exec node".into()));
        };
        let line = format!(
            "{}: {}",
            spec.container.clone().unwrap_or_default(),
            spec.command
        );
        self.0.commands.lock().unwrap().push(line);
        if spec.command.contains("hang") {
            ctx.cancel().cancelled().await;
            return Err(NodeError::Cancelled);
        }
        if spec.command.contains("panic") {
            panic!("the backend exploded");
        }
        Ok(NodeOutcome::from_exit_code(0, "ok"))
    }
}

/// Records each run end it sees.
#[derive(Default)]
struct Hooks {
    started: Mutex<Vec<String>>,
    ended: Mutex<Vec<(String, RunStatus)>>,
}

#[async_trait]
impl RunHooks for Hooks {
    async fn run_starting(&self, run_id: &str, _: &boitata_core::Emitter) {
        self.started.lock().unwrap().push(run_id.to_owned());
    }

    async fn run_ending(&self, run: &RunEnding<'_>) {
        run.emitter.emit_or_log(
            None,
            EventPayload::SandboxDestroyed {
                sandbox_id: "from-the-hook".into(),
            },
        );
        self.ended
            .lock()
            .unwrap()
            .push((run.run_id.to_owned(), run.status));
    }
}

fn sandbox_executor(backend: &Arc<FakeSandbox>, hooks: &Arc<Hooks>) -> Executor {
    let mut handlers = NodeHandlers::host();
    handlers
        .register(HandlerKind::Provision, Arc::new(Provision(backend.clone())))
        .register(
            HandlerKind::SandboxExec,
            Arc::new(SandboxExec(backend.clone())),
        );
    Executor::new(handlers).with_hook(hooks.clone())
}

const SANDBOXED: &str = r#"name: sandboxed
entry: box
nodes:
  box: { type: provision, image: "img" }
  test: { type: exec, container: "{box}", command: "COMMAND" }
  host: { type: exec, command: "echo on the host" }
edges:
  - { from: box, to: test }
  - { from: test, to: host }
"#;

#[tokio::test]
async fn handlers_from_another_crate_plug_in_and_cleanup_runs_before_run_finished() {
    let backend = Arc::new(FakeSandbox::default());
    let hooks = Arc::new(Hooks::default());
    let h = Harness::new();
    let report = h
        .run_with(
            sandbox_executor(&backend, &hooks),
            &SANDBOXED.replace("COMMAND", "make test"),
        )
        .await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    assert_eq!(path(&report), ["box", "test", "host"]);
    assert_eq!(
        *backend.commands.lock().unwrap(),
        ["sandbox-0-img: make test"]
    );
    assert_eq!(backend.destroyed.load(Ordering::SeqCst), 1);
    assert_eq!(*hooks.started.lock().unwrap(), ["run-1"]);
    assert_eq!(
        *hooks.ended.lock().unwrap(),
        [("run-1".to_owned(), RunStatus::Succeeded)]
    );
    // The hook's event comes before run_finished.
    let kinds: Vec<&str> = h
        .recorder
        .events()
        .iter()
        .map(|e| e.payload.kind())
        .collect();
    assert_eq!(
        &kinds[kinds.len() - 2..],
        ["sandbox_destroyed", "run_finished"]
    );
}

#[tokio::test]
async fn a_panicking_node_fails_the_run_and_teardown_still_runs() {
    let backend = Arc::new(FakeSandbox::default());
    let hooks = Arc::new(Hooks::default());
    let h = Harness::new();
    let report = h
        .run_with(
            sandbox_executor(&backend, &hooks),
            &SANDBOXED.replace("COMMAND", "panic now"),
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.clone().unwrap();
    assert!(
        error.contains("node \"test\" panicked: the backend exploded"),
        "{error}"
    );
    assert_eq!(path(&report), ["box", "test"]);
    assert_eq!(backend.destroyed.load(Ordering::SeqCst), 1);
    assert_eq!(
        *hooks.ended.lock().unwrap(),
        [("run-1".to_owned(), RunStatus::Failed)]
    );
    let EventPayload::RunFinished { status, error } = run_finished(&h.recorder.events()) else {
        panic!()
    };
    assert_eq!(status, RunStatus::Failed);
    assert!(error.unwrap().contains("panicked"));
}

#[tokio::test]
async fn cancellation_stops_a_sandbox_node_and_teardown_runs() {
    let backend = Arc::new(FakeSandbox::default());
    let hooks = Arc::new(Hooks::default());
    let h = Harness::new();
    let executor = sandbox_executor(&backend, &hooks);
    let bp = blueprint(&SANDBOXED.replace("COMMAND", "hang"));
    let request = h.request("t");
    let run = tokio::spawn(async move { executor.run(&bp, request).await });
    while backend.commands.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    h.cancel.cancel();
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.status, RunStatus::Cancelled);
    assert_eq!(backend.destroyed.load(Ordering::SeqCst), 1);
    assert_eq!(
        *hooks.ended.lock().unwrap(),
        [("run-1".to_owned(), RunStatus::Cancelled)]
    );
}

#[tokio::test]
async fn a_sandbox_node_without_a_backend_is_refused_before_the_run() {
    let h = Harness::new();
    let bp = blueprint(&SANDBOXED.replace("COMMAND", "make test"));
    let err = Executor::new(NodeHandlers::host())
        .run(&bp, h.request("t"))
        .await
        .unwrap_err();
    assert_eq!(err.missing_handlers().count(), 2);
    assert_eq!(
        err.to_string(),
        "node \"box\": type provision needs a sandbox backend, and none is configured for this run; \
         node \"test\": type exec with container needs a sandbox backend, and none is configured for this run"
    );
    assert!(h.recorder.events().is_empty(), "nothing may run");
}

#[tokio::test]
async fn missing_handlers_and_bad_params_are_reported_together() {
    let mut h = Harness::new();
    h.params.insert("colour".into(), "red".into());
    let bp = blueprint(
        r#"name: sandboxed
entry: box
params:
  repo: { description: "the repository" }
nodes:
  box: { type: provision, image: "img" }
  code: { type: exec, command: "echo {params.repo}" }
edges:
  - { from: box, to: code }
"#,
    );
    let executor = Executor::new(NodeHandlers::host());
    let err = executor
        .check_run(&bp, &h.params)
        .expect_err("params and a missing handler");
    let problems: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        problems,
        [
            "param \"colour\" is not declared (params: repo)",
            "param \"repo\" is required: set it with --param repo=VALUE (the repository)",
            "node \"box\": type provision needs a sandbox backend, and none is configured for this run",
        ]
    );
    assert_eq!(err.param_problems().count(), 2);
    assert_eq!(err.missing_handlers().count(), 1);
    // `run` refuses with the same report, before any event.
    let refused = executor.run(&bp, h.request("t")).await.unwrap_err();
    assert_eq!(refused, err);
    assert!(h.recorder.events().is_empty(), "nothing may run");
}

/// A handler's error that names its node already is not prefixed a second time;
/// one that does not is prefixed once.
#[tokio::test]
async fn a_handler_error_names_its_node_once() {
    let backend = Arc::new(FakeSandbox::default());
    let hooks = Arc::new(Hooks::default());
    let mut h = Harness::new();
    h.params.insert("net".into(), "host".into());
    let yaml = r#"name: net
entry: box
params:
  net: { description: "the network" }
nodes:
  box: { type: provision, image: "img", network: "{params.net}" }
"#;
    let report = h.run_with(sandbox_executor(&backend, &hooks), yaml).await;
    assert_eq!(report.status, RunStatus::Failed);
    let expected = r#"node "box": network "host" is not supported: use bridge or none"#;
    let finished = h
        .recorder
        .events()
        .into_iter()
        .find_map(|e| match e.payload {
            EventPayload::NodeFinished { error, .. } => error,
            _ => None,
        })
        .unwrap();
    assert_eq!(finished, expected);
    let error = report.error.unwrap();
    assert_eq!(error.matches("node \"box\"").count(), 1, "{error}");
    assert!(error.contains(expected), "{error}");

    // An error without the node's name gets it once.
    let mut handlers = NodeHandlers::host();
    handlers.register(
        HandlerKind::Provision,
        Arc::new(SandboxExec(backend.clone())),
    );
    let h = Harness::new();
    let report = h
        .run_with(
            Executor::new(handlers),
            "name: wrong\nentry: box\nnodes:\n  box: { type: provision, image: img }\n",
        )
        .await;
    let error = report.error.unwrap();
    assert!(error.contains(r#"node "box": not an exec node"#), "{error}");
    assert_eq!(error.matches("node \"box\"").count(), 1, "{error}");
}
