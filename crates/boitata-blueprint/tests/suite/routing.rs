//! The walk: routing, END, limits, status, events, placeholders, params.

use boitata_blueprint::{Executor, NodeHandlers};
use boitata_core::{EventPayload, Outcome, RunStatus};

use super::support::{blueprint, path, run_finished, Harness};

#[tokio::test]
async fn an_exit_code_edge_wins_over_a_later_failure_edge() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: route
entry: a
nodes:
  a: { type: exec, command: "exit 3" }
  three: { type: exec, command: "echo three" }
  failed: { type: exec, command: "echo failed" }
edges:
  - { from: a, when: 3, to: three }
  - { from: a, when: failure, to: failed }
"#,
        )
        .await;
    assert_eq!(path(&report), ["a", "three"]);
    assert_eq!(report.steps[0].exit_code, Some(3));
    assert_eq!(report.steps[0].outcome, Outcome::Failure);
    assert_eq!(report.status, RunStatus::Succeeded);
    assert_eq!(report.last_output.as_deref(), Some("three\n"));
}

#[tokio::test]
async fn failure_is_taken_when_no_exit_code_edge_matches() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: route
entry: a
nodes:
  a: { type: exec, command: "exit 4" }
  three: { type: exec, command: "echo three" }
  failed: { type: exec, command: "echo failed" }
edges:
  - { from: a, when: 3, to: three }
  - { from: a, when: success, to: three }
  - { from: a, when: failure, to: failed }
"#,
        )
        .await;
    assert_eq!(path(&report), ["a", "failed"]);
}

#[tokio::test]
async fn an_edge_without_when_is_always_taken() {
    let h = Harness::new();
    let yaml = |command: &str| {
        format!(
            r#"name: always
entry: a
nodes:
  a: {{ type: exec, command: "{command}" }}
  b: {{ type: exec, command: "true" }}
edges:
  - {{ from: a, to: b }}
  - {{ from: a, when: failure, to: END }}
"#
        )
    };
    assert_eq!(path(&h.run(&yaml("true")).await), ["a", "b"]);
    assert_eq!(path(&h.run(&yaml("false")).await), ["a", "b"]);
}

#[tokio::test]
async fn no_matching_edge_ends_the_walk_with_the_last_outcome() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: stop
entry: a
nodes:
  a: { type: exec, command: "exit 1" }
  b: { type: exec, command: "true" }
edges:
  - { from: a, when: success, to: b }
"#,
        )
        .await;
    assert_eq!(path(&report), ["a"]);
    assert_eq!(report.status, RunStatus::Failed);

    let report = h
        .run(
            r#"name: stop
entry: a
nodes:
  a: { type: exec, command: "true" }
  b: { type: exec, command: "true" }
edges:
  - { from: a, when: failure, to: b }
"#,
        )
        .await;
    assert_eq!(path(&report), ["a"]);
    assert_eq!(report.status, RunStatus::Succeeded);
}

#[tokio::test]
async fn end_ends_the_walk_and_the_status_is_the_last_outcome() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: end
entry: a
nodes:
  a: { type: exec, command: "exit 2" }
  b: { type: exec, command: "true" }
edges:
  - { from: a, to: END }
  - { from: a, to: b }
"#,
        )
        .await;
    assert_eq!(path(&report), ["a"]);
    assert_eq!(report.status, RunStatus::Failed);
    assert!(report.error.as_deref().unwrap().contains("\"a\""));
}

#[tokio::test]
async fn a_loop_ends_at_max_visits_naming_the_node() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: retry
entry: flaky
nodes:
  flaky: { type: exec, command: "exit 1", max_visits: 3 }
edges:
  - { from: flaky, when: failure, to: flaky }
"#,
        )
        .await;
    assert_eq!(path(&report), ["flaky", "flaky", "flaky"]);
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.unwrap();
    assert!(
        error.contains("node \"flaky\" reached max_visits (3)"),
        "{error}"
    );
    let EventPayload::RunFinished { status, error } = run_finished(&h.recorder.events()) else {
        panic!()
    };
    assert_eq!(status, RunStatus::Failed);
    assert!(error.unwrap().contains("flaky"));
}

#[tokio::test]
async fn a_loop_that_succeeds_before_max_visits_succeeds() {
    let h = Harness::new();
    // Fails twice, then passes: a counter file in the workspace.
    let report = h
        .run(
            r#"name: retry
entry: flaky
nodes:
  flaky: { type: exec, command: "echo x >> count; test $(wc -l < count) -ge 3", max_visits: 3 }
edges:
  - { from: flaky, when: failure, to: flaky }
"#,
        )
        .await;
    assert_eq!(path(&report), ["flaky", "flaky", "flaky"]);
    assert_eq!(report.status, RunStatus::Succeeded);
}

#[tokio::test]
async fn a_loop_ends_at_max_steps_naming_the_node() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: ping-pong
entry: ping
max_steps: 5
nodes:
  ping: { type: exec, command: "true", max_visits: 100 }
  pong: { type: exec, command: "true", max_visits: 100 }
edges:
  - { from: ping, to: pong }
  - { from: pong, to: ping }
"#,
        )
        .await;
    assert_eq!(path(&report), ["ping", "pong", "ping", "pong", "ping"]);
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.unwrap();
    assert!(error.contains("max_steps (5)"), "{error}");
    assert!(error.contains("node \"pong\""), "{error}");
}

#[tokio::test]
async fn node_outputs_flow_into_later_nodes() {
    let mut h = Harness::new();
    h.params.insert("greeting".into(), "hi".into());
    let report = h
        .run(
            r#"name: flow
entry: a
params:
  greeting: { default: hello }
  who: { default: world }
nodes:
  a: { type: exec, command: "printf 'from a\n\n'" }
  b:
    type: exec
    command: "echo '[{a}] {params.greeting} {params.who} {task} {run.id} {{literal}}' && echo \"$GREETING\""
    env: { GREETING: "{params.greeting} from env" }
edges:
  - { from: a, to: b }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    assert_eq!(
        report.outputs["b"],
        "[from a] hi world the task run-1 {literal}\nhi from env\n"
    );
}

#[tokio::test]
async fn a_reference_to_a_node_that_has_not_run_fails_naming_both() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: early
entry: a
nodes:
  a: { type: exec, command: "echo {b}" }
  b: { type: exec, command: "echo b" }
edges:
  - { from: a, to: b }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.unwrap();
    assert!(
        error.contains("node \"a\" uses {b}, but node \"b\" has not run yet"),
        "{error}"
    );
    // The failed node is still reported, with the error.
    let finished: Vec<_> = h
        .recorder
        .events()
        .into_iter()
        .filter(|e| e.payload.kind() == "node_finished")
        .collect();
    assert_eq!(finished.len(), 1);
    let EventPayload::NodeFinished { outcome, error, .. } = &finished[0].payload else {
        panic!()
    };
    assert_eq!(*outcome, Outcome::Failure);
    assert!(error.as_deref().unwrap().contains("\"b\""));
}

#[tokio::test]
async fn every_node_is_framed_by_started_and_finished_events() {
    let h = Harness::new();
    h.run(
        r#"name: events
entry: a
nodes:
  a: { type: exec, command: "echo out; echo err >&2" }
  b: { type: exec, command: "exit 7" }
edges:
  - { from: a, to: b }
"#,
    )
    .await;
    let events = h.recorder.events();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let frame: Vec<(Option<&str>, &str)> = events
        .iter()
        .filter(|e| e.payload.kind() != "exec_output")
        .map(|e| (e.node.as_deref(), e.payload.kind()))
        .collect();
    assert_eq!(
        frame,
        [
            (None, "run_started"),
            (Some("a"), "node_started"),
            (Some("a"), "node_finished"),
            (Some("b"), "node_started"),
            (Some("b"), "node_finished"),
            (None, "run_finished"),
        ]
    );
    let EventPayload::RunStarted {
        blueprint,
        task,
        provider,
        ..
    } = &events[0].payload
    else {
        panic!()
    };
    assert_eq!(blueprint.as_deref(), Some("events"));
    assert_eq!(task, "the task");
    assert_eq!(*provider, None, "no model is used, so none is named");
    let streams: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ExecOutput { stream, chunk } => {
                Some((format!("{stream:?}"), chunk.clone()))
            }
            _ => None,
        })
        .collect();
    assert!(
        streams.contains(&("Stdout".into(), "out\n".into())),
        "{streams:?}"
    );
    assert!(
        streams.contains(&("Stderr".into(), "err\n".into())),
        "{streams:?}"
    );
    let b_finished = events
        .iter()
        .find(|e| e.node.as_deref() == Some("b") && e.payload.kind() == "node_finished")
        .unwrap();
    let EventPayload::NodeFinished {
        exit_code, outcome, ..
    } = &b_finished.payload
    else {
        panic!()
    };
    assert_eq!((*exit_code, *outcome), (Some(7), Outcome::Failure));
    let EventPayload::RunFinished { status, .. } = run_finished(&events) else {
        panic!()
    };
    assert_eq!(status, RunStatus::Failed);
}

#[tokio::test]
async fn node_started_shows_the_command_with_its_placeholders_substituted() {
    let mut h = Harness::new();
    h.params.insert("suite".into(), "unit".into());
    let report = h
        .run(
            r#"name: detail
entry: a
params:
  suite: {}
nodes:
  a: { type: exec, command: "echo built" }
  b: { type: exec, command: "echo {params.suite} after {a}; exit 1" }
  c: { type: exec, command: "echo {c}" }
edges:
  - { from: a, to: b }
  - { from: b, to: c }
"#,
        )
        .await;
    let details: Vec<(Option<String>, Option<String>)> = h
        .recorder
        .events()
        .into_iter()
        .filter_map(|e| match e.payload {
            EventPayload::NodeStarted { detail, .. } => Some((e.node, detail)),
            _ => None,
        })
        .collect();
    assert_eq!(
        details,
        [
            (Some("a".into()), Some("echo built".into())),
            (
                Some("b".into()),
                Some("echo unit after built; exit 1".into())
            ),
            // {c} cannot be substituted before c has run: no detail, and the run fails.
            (Some("c".into()), None),
        ]
    );
    assert_eq!(report.status, RunStatus::Failed);
}

#[tokio::test]
async fn a_failed_command_as_the_last_node_names_its_exit_code_in_the_run_error() {
    let h = Harness::new();
    let report = h
        .run("name: last\nentry: a\nnodes:\n  a: { type: exec, command: \"exit 3\" }\n")
        .await;
    assert_eq!(
        report.error.as_deref(),
        Some("the last node, \"a\", failed with exit code 3")
    );
}

#[tokio::test]
async fn a_missing_required_param_fails_before_anything_runs() {
    let mut h = Harness::new();
    h.params.insert("colour".into(), "blue".into());
    let bp = blueprint(
        r#"name: needs
entry: a
params:
  repo: { description: "the repository" }
  branch: { default: main }
nodes:
  a: { type: exec, command: "touch ran; echo {params.repo}" }
"#,
    );
    let err = Executor::new(NodeHandlers::host())
        .run(&bp, h.request("t"))
        .await
        .unwrap_err();
    assert_eq!(err.param_problems().count(), 2, "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("param \"repo\" is required: set it with --param repo=VALUE"),
        "{message}"
    );
    assert!(
        message.contains("param \"colour\" is not declared"),
        "{message}"
    );
    assert!(h.recorder.events().is_empty());
    assert!(!h.workspace.path().join("ran").exists());
}

#[tokio::test]
async fn a_node_timeout_is_a_failure_that_routes() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: slow
entry: slow
nodes:
  slow: { type: exec, command: "echo started; sleep 1000", timeout: 300ms }
  after: { type: exec, command: "echo after" }
edges:
  - { from: slow, when: failure, to: after }
"#,
        )
        .await;
    assert_eq!(path(&report), ["slow", "after"]);
    let error = report.steps[0].error.as_deref().unwrap();
    assert!(
        error.contains("node \"slow\" timed out after 300ms"),
        "{error}"
    );
    assert_eq!(report.outputs["slow"], "started\n");
    assert_eq!(report.status, RunStatus::Succeeded);
}
