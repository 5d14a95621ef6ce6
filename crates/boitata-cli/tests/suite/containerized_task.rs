//! The seed blueprint, `examples/blueprints/containerized_task.yaml`, end to end in
//! real Docker on a real third-party project: jsonpointer 3.0.0 from PyPI (vendored
//! under examples/projects/jsonpointer) with one function broken, repaired by the
//! agent running inside the sandbox (a recorded, scripted session). And the agent
//! process killed in the middle of its turn.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use boitata_core::{Event, EventPayload, OutputStream, RunStatus};
use boitata_test_support::docker::{docker, repo_root};

use super::sandbox_support::{agent_daemon, assert_torn_down, events, try_read_until, Home};

/// The example project, prepared by the same script as `scripts/demo.sh` uses: a git
/// repository whose `escape` is broken.
fn broken_jsonpointer(home: &Home) -> PathBuf {
    let dir = home.path().join("jsonpointer");
    let script = repo_root().join("scripts/prepare-example-project.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn blueprint_file() -> PathBuf {
    repo_root().join("examples/blueprints/containerized_task.yaml")
}

/// The stdout of each visit of `node`, in order.
fn exec_stdout_by_visit(events: &[Event], node: &str) -> Vec<String> {
    let mut visits: Vec<String> = Vec::new();
    for e in events.iter().filter(|e| e.node.as_deref() == Some(node)) {
        match &e.payload {
            EventPayload::NodeStarted { .. } => visits.push(String::new()),
            EventPayload::ExecOutput {
                stream: OutputStream::Stdout,
                chunk,
            } => visits.last_mut().unwrap().push_str(chunk),
            _ => {}
        }
    }
    visits
}

fn node_path(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e.payload.kind() == "node_started")
        .filter_map(|e| e.node.as_deref())
        .collect()
}

fn run_status(events: &[Event]) -> (RunStatus, Option<String>) {
    match &events.last().unwrap().payload {
        EventPayload::RunFinished { status, error } => (*status, error.clone()),
        other => panic!("the last event is not run_finished: {other:?}"),
    }
}

fn file_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn the_agent_in_the_sandbox_repairs_jsonpointer_and_the_tests_pass() {
    let Some(_daemon) = agent_daemon("containerized_task_repairs_jsonpointer") else {
        return;
    };
    let home = Home::new();
    let repo = broken_jsonpointer(&home);
    let broken_source = file_text(&repo.join("jsonpointer.py"));
    let script = repo_root().join("examples/scripts/fix-jsonpointer.json");
    let output = home
        .boitata()
        .args(["run", "Make the tests pass", "--json", "--blueprint"])
        .arg(blueprint_file())
        .arg("--param")
        .arg(format!("repo={}", repo.display()))
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    let events = events(&output.stdout);
    assert!(
        !events.is_empty(),
        "no events; exit {:?}, stderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    let _scope = assert_torn_down(&events);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}\n{events:#?}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(run_status(&events), (RunStatus::Succeeded, None));

    // provision, checkout, tests fail, the agent works, tests pass.
    assert_eq!(node_path(&events), ["box", "code", "test", "work", "test"]);
    let test_runs = exec_stdout_by_visit(&events, "test");
    assert!(
        test_runs[0].contains("FAILED (failures=3)"),
        "the first test run should fail: {}",
        test_runs[0]
    );
    assert!(
        test_runs[0].contains("\"/workspace/jsonpointer.py\""),
        "the tests ran in the sandbox's checkout: {}",
        test_runs[0]
    );
    assert!(
        test_runs[1].contains("Ran 27 tests") && test_runs[1].trim_end().ends_with("OK"),
        "the second test run should pass: {}",
        test_runs[1]
    );

    // The agent's tool calls, made inside the sandbox, are events of this run, tagged
    // with the agent's node, in order, each answered before the next call.
    let work: Vec<&Event> = events
        .iter()
        .filter(|e| e.node.as_deref() == Some("work"))
        .collect();
    let mut calls = Vec::new();
    let mut open_call: Option<String> = None;
    for e in &work {
        match &e.payload {
            EventPayload::ToolCall { call_id, tool, .. } => {
                assert!(open_call.is_none(), "a call before the last was answered");
                open_call = Some(call_id.clone());
                calls.push(tool.as_str());
            }
            EventPayload::ToolResult {
                call_id, ok, tool, ..
            } => {
                assert_eq!(open_call.take().as_ref(), Some(call_id), "{tool}");
                assert!(ok, "{tool} failed: {e:?}");
            }
            _ => {}
        }
    }
    assert_eq!(
        calls,
        [
            "execute_command",
            "search",
            "file_edit",
            "execute_command",
            "git_diff"
        ]
    );
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let results: Vec<&str> = work
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolResult { output, .. } => Some(output.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        results[0].contains("FAILED (failures=3)") && results[0].contains("/workspace/"),
        "the agent ran the tests inside the sandbox: {}",
        results[0]
    );
    assert!(results[3].contains("OK"), "{}", results[3]);
    assert!(
        results[4].contains("-    return s.replace('/', '~1').replace('~', '~0')")
            && results[4].contains("+    return s.replace('~', '~0').replace('/', '~1')"),
        "git diff in the sandbox shows the fix: {}",
        results[4]
    );
    let finished_work = work
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::NodeFinished {
                outcome,
                output_preview,
                ..
            } => Some((*outcome, output_preview.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(finished_work.0, boitata_core::Outcome::Success);
    assert!(
        finished_work.1.contains("All 27 tests pass"),
        "{}",
        finished_work.1
    );

    // The repair happened in the sandbox only: the host repository is as it was.
    assert_eq!(file_text(&repo.join("jsonpointer.py")), broken_source);
}

/// A session whose first turn runs a long command, so that the agent can be killed in
/// the middle of its turn.
const LONG_TURN: &str = r#"{
  "description": "runs a long command; the test kills the agent meanwhile",
  "turns": [
    { "text": "Running a long command.",
      "tool_calls": [{ "name": "execute_command", "arguments": { "command": "sleep 60" } }] },
    { "text": "never reached" }
  ]
}"#;

/// Kills every `boitata-agent` process in the container with SIGKILL, from inside.
const KILL_AGENT: &str = r#"for p in /proc/[0-9]*; do
  if [ "$(cat "$p/comm" 2>/dev/null)" = boitata-agent ]; then kill -9 "${p#/proc/}" && echo killed; fi
done"#;

#[test]
fn the_agent_killed_mid_turn_fails_the_node_and_the_run_and_the_sandbox_is_destroyed() {
    let Some(_daemon) = agent_daemon("containerized_task_agent_killed") else {
        return;
    };
    let home = Home::new();
    let repo = broken_jsonpointer(&home);
    let script = home.path().join("long-turn.json");
    std::fs::write(&script, LONG_TURN).unwrap();
    let blueprint = blueprint_file();
    let repo_param = format!("repo={}", repo.display());
    let (mut child, mut lines) = home.spawn(&[
        "run",
        "Make the tests pass",
        "--json",
        "--blueprint",
        blueprint.to_str().unwrap(),
        "--param",
        &repo_param,
        "--provider",
        "scripted",
        "--script",
        script.to_str().unwrap(),
    ]);
    let mut seen = Vec::new();
    let started = try_read_until(&mut lines, &mut seen, |e| {
        e.node.as_deref() == Some("work")
            && matches!(&e.payload, EventPayload::ToolCall { tool, .. } if tool == "execute_command")
    });
    assert!(
        started,
        "the agent's command never started; stderr: {}\n{seen:#?}",
        home.stderr()
    );
    let sandbox = seen
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::SandboxProvisioned { sandbox_id, .. } => Some(sandbox_id.clone()),
            _ => None,
        })
        .unwrap();

    // The agent is in the middle of its turn (its command sleeps): kill it.
    let killed = docker(&["exec", &sandbox, "sh", "-c", KILL_AGENT]);
    assert_eq!(
        String::from_utf8_lossy(&killed.stdout).trim(),
        "killed",
        "{}",
        String::from_utf8_lossy(&killed.stderr)
    );

    for line in lines.by_ref() {
        seen.push(serde_json::from_str(&line.unwrap()).unwrap());
    }
    let status = child.wait().unwrap();
    let events = seen;
    let _scope = assert_torn_down(&events);
    assert_eq!(status.code(), Some(1), "{events:#?}");

    let work_error = events
        .iter()
        .filter(|e| e.node.as_deref() == Some("work"))
        .find_map(|e| match &e.payload {
            EventPayload::NodeFinished { outcome, error, .. } => Some((*outcome, error.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(work_error.0, boitata_core::Outcome::Failure);
    let error = work_error.1.unwrap_or_default();
    assert!(
        error.contains("node \"work\": boitata-agent in sandbox")
            && error.contains("closed the connection during the turn")
            && error.contains("the agent process is gone"),
        "{error}"
    );
    let (run, run_error) = run_status(&events);
    assert_eq!(run, RunStatus::Failed);
    assert!(
        run_error
            .unwrap_or_default()
            .contains("closed the connection during the turn"),
        "{events:#?}"
    );
    // The run stopped at the failed node: no test run after it.
    assert_eq!(node_path(&events), ["box", "code", "test", "work"]);
    assert!(!docker(&["inspect", "--type", "container", &sandbox])
        .status
        .success());
}
