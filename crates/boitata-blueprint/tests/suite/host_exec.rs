//! Host `exec`: cancellation kills the process group, explicit environment, closed
//! stdin, nothing left behind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use boitata_blueprint::{Executor, NodeHandlers, RuntimeSource};
use boitata_core::config::Config;
use boitata_core::{EventPayload, RunStatus};

use super::support::{blueprint, live_processes_in_group, path, run_finished, Harness};

/// Waits until some stdout chunk of the run parses as a pid.
async fn wait_for_pid(h: &Harness) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for event in h.recorder.events() {
            if let EventPayload::ExecOutput { chunk, .. } = &event.payload {
                if let Ok(pid) = chunk.trim().parse::<i32>() {
                    return pid;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "the command never printed its pid"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn cancelling_a_run_kills_the_whole_process_group_and_records_run_finished() {
    let h = Harness::new();
    let bp = blueprint(
        r#"name: long
entry: sleep
nodes:
  sleep: { type: exec, command: "sleep 1000 & echo $$; sleep 1000; wait" }
  after: { type: exec, command: "touch after" }
edges:
  - { from: sleep, to: after }
"#,
    );
    let executor = Executor::new(NodeHandlers::host());
    let request = h.request("t");
    let run = tokio::spawn(async move { executor.run(&bp, request).await });

    // `$$` is the shell's pid, which leads the node's own process group.
    let pgid = wait_for_pid(&h).await;
    assert!(
        live_processes_in_group(pgid).len() >= 2,
        "the shell and its background sleep should be running"
    );
    h.cancel.cancel();
    let report = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("the run did not stop after cancellation")
        .unwrap()
        .unwrap();

    assert_eq!(report.status, RunStatus::Cancelled);
    assert_eq!(path(&report), ["sleep"]);
    assert!(!h.workspace.path().join("after").exists());
    let events = h.recorder.events();
    let EventPayload::RunFinished { status, .. } = run_finished(&events) else {
        panic!()
    };
    assert_eq!(status, RunStatus::Cancelled);
    let finished = events
        .iter()
        .find(|e| e.payload.kind() == "node_finished")
        .unwrap();
    let EventPayload::NodeFinished { error, .. } = &finished.payload else {
        panic!()
    };
    assert_eq!(error.as_deref(), Some("cancelled"));
    // Nothing of the group survives, not even the background sleep.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_processes_in_group(pgid).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(live_processes_in_group(pgid), Vec::<i32>::new());
}

#[tokio::test]
async fn a_background_child_does_not_outlive_its_node_or_hold_it_open() {
    let h = Harness::new();
    let started = Instant::now();
    let report = h
        .run(
            r#"name: daemon
entry: a
nodes:
  a: { type: exec, command: "sleep 1000 & echo $$" }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Succeeded);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the node waited for its background child"
    );
    let pgid: i32 = report.outputs["a"].trim().parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_processes_in_group(pgid).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(live_processes_in_group(pgid), Vec::<i32>::new());
}

#[tokio::test]
async fn commands_get_an_explicit_environment_without_secrets_and_a_closed_stdin() {
    let mut h = Harness::new();
    let env: std::collections::BTreeMap<String, String> = [
        ("PATH", std::env::var("PATH").unwrap_or_default().as_str()),
        ("HOME", "/home/tester"),
        ("OPENAI_API_KEY", "sk-must-not-leak"),
        ("SOME_OTHER_VAR", "also-not-passed"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    h.runtime = RuntimeSource::Config {
        config: Config::default(),
        env: Arc::new(env),
    };
    let report = h
        .run(
            r#"name: env
entry: a
nodes:
  a: { type: exec, command: "cat; env | sort", env: { NODE_VAR: "set by the node" } }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Succeeded);
    let output = &report.outputs["a"];
    assert!(output.contains("HOME=/home/tester\n"), "{output}");
    assert!(output.contains("NODE_VAR=set by the node\n"), "{output}");
    assert!(output.contains("BOITATA_RUN_ID=run-1\n"), "{output}");
    assert!(output.contains("BOITATA_NODE=a\n"), "{output}");
    assert!(!output.contains("sk-must-not-leak"), "{output}");
    assert!(!output.contains("SOME_OTHER_VAR"), "{output}");
}

#[tokio::test]
async fn a_command_runs_in_the_workspace() {
    let h = Harness::new();
    std::fs::write(h.workspace.path().join("marker.txt"), "here").unwrap();
    let report = h
        .run(
            r#"name: cwd
entry: a
nodes:
  a: { type: exec, command: "cat marker.txt" }
"#,
        )
        .await;
    assert_eq!(report.outputs["a"], "here");
}

#[tokio::test]
async fn a_missing_workspace_is_a_node_error_naming_the_node() {
    let h = Harness::new();
    let bp = blueprint(
        r#"name: nowhere
entry: a
nodes:
  a: { type: exec, command: "true" }
"#,
    );
    let mut request = h.request("t");
    request.workspace = h.workspace.path().join("does-not-exist");
    let report = Executor::new(NodeHandlers::host())
        .run(&bp, request)
        .await
        .unwrap();
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.unwrap();
    assert!(error.contains("node \"a\": cannot start sh -c"), "{error}");
}

#[tokio::test]
async fn a_command_runs_in_its_workdir_relative_to_the_workspace_or_absolute() {
    let h = Harness::new();
    std::fs::create_dir(h.workspace.path().join("sub")).unwrap();
    std::fs::write(h.workspace.path().join("sub/marker.txt"), "in sub").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("marker.txt"), "elsewhere").unwrap();
    let report = h
        .run(&format!(
            r#"name: cwd
entry: a
nodes:
  a: {{ type: exec, command: "cat marker.txt", workdir: sub }}
  b: {{ type: exec, command: "cat marker.txt", workdir: "{}" }}
edges:
  - {{ from: a, to: b }}
"#,
            elsewhere.path().display()
        ))
        .await;
    assert_eq!(report.status, RunStatus::Succeeded, "{:?}", report.error);
    assert_eq!(report.outputs["a"], "in sub");
    assert_eq!(report.outputs["b"], "elsewhere");
}

#[tokio::test]
async fn a_missing_workdir_fails_the_node_naming_the_directory() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: cwd
entry: a
nodes:
  a: { type: exec, command: "true", workdir: no-such-dir }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.unwrap();
    assert!(error.contains("no-such-dir"), "{error}");
}

#[tokio::test]
async fn a_split_character_after_an_invalid_byte_is_joined_across_reads() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: utf8
entry: a
nodes:
  a: { type: exec, command: "printf '\\377\\344\\270'; sleep 0.5; printf '\\200 two\\n'" }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    let chunks: Vec<String> = h
        .recorder
        .events()
        .into_iter()
        .filter_map(|e| match e.payload {
            EventPayload::ExecOutput { chunk, .. } => Some(chunk),
            _ => None,
        })
        .collect();
    // One line, one event (a line is held until it ends).
    assert_eq!(chunks, ["\u{FFFD}\u{4E00} two\n"]);
}

/// Param defaults and `env` values written as plain numbers render as written:
/// `3.10` stays `3.10` (not `3.1`), and so do `1.0`, `007`, `0x1F`, `1e3` and a
/// 23-digit integer.
#[tokio::test]
async fn numbers_in_text_fields_render_as_written() {
    let h = Harness::new();
    let report = h
        .run(
            r#"name: numbers
params:
  v: { default: 3.10 }
  one: { default: 1.0 }
  octal: { default: 007 }
  hex: { default: 0x1F }
  exp: { default: 1e3 }
  big: { default: 12345678901234567890123 }
  anchored: { default: &n 2.50 }
entry: a
nodes:
  a:
    type: exec
    env: { V: 3.10, B: true, N: *n }
    command: 'echo "{params.v} $V {params.one} {params.octal} {params.hex} {params.exp} {params.big} {params.anchored} $N $B"'
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    // An alias (`*n`) is a copy of its anchor's value: a number, shown as one.
    assert_eq!(
        report.outputs["a"],
        "3.10 3.10 1.0 007 0x1F 1e3 12345678901234567890123 2.50 2.5 true\n"
    );
}
