//! `boitata run TASK --blueprint ...` through the built binary: params, name lookup,
//! exit codes, the run store, and Ctrl-C during a long host command.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use boitata_core::{Event, EventPayload, RunStatus};

fn boitata(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("boitata").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("BOITATA_DATA_DIR", home.join("data"))
        .current_dir(home);
    cmd
}

fn stored(home: &Path, run_id: &str) -> serde_json::Value {
    let shown = boitata(home)
        .args(["runs", "show", run_id, "--json"])
        .output()
        .unwrap();
    assert_eq!(shown.status.code(), Some(0));
    serde_json::from_slice(&shown.stdout).unwrap()
}

const HELLO: &str = r#"name: hello
entry: greet
params:
  who: { description: "who to greet" }
  punctuation: { default: "!" }
nodes:
  greet: { type: exec, command: "echo hello {params.who}{params.punctuation}" }
  shout: { type: exec, command: "echo '{greet}' | tr a-z A-Z; echo '{task}'" }
edges:
  - { from: greet, when: success, to: shout }
"#;

#[test]
fn a_blueprint_found_by_name_runs_with_params_and_prints_the_last_output() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("blueprints")).unwrap();
    std::fs::write(home.path().join("blueprints/hello.yaml"), HELLO).unwrap();
    let output = boitata(home.path())
        .args([
            "run",
            "the task",
            "--blueprint",
            "hello",
            "--param",
            "who=world",
            "--workspace",
        ])
        .arg(home.path())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "HELLO WORLD!\nthe task\n"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("started (blueprint hello)"), "{stderr}");
}

#[test]
fn json_events_are_stored_and_a_failing_node_exits_1() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("fails.yaml");
    std::fs::write(
        &file,
        "name: fails\nentry: a\nnodes:\n  a: { type: exec, command: \"echo about to fail; exit 3\" }\n",
    )
    .unwrap();
    let output = boitata(home.path())
        .args(["run", "t", "--json", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let events: Vec<Event> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.payload.kind()).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "node_started",
            "exec_output",
            "node_finished",
            "run_finished"
        ]
    );
    assert!(matches!(
        events[3].payload,
        EventPayload::NodeFinished {
            exit_code: Some(3),
            ..
        }
    ));
    let value = stored(home.path(), &events[0].run_id);
    assert_eq!(value["run"]["status"], "failed");
    assert_eq!(value["run"]["blueprint"], "fails");
    let stored_events: Vec<Event> = serde_json::from_value(value["events"].clone()).unwrap();
    assert_eq!(stored_events, events);
}

#[test]
fn bad_params_and_unknown_blueprints_are_usage_errors_before_any_run() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("hello.yaml");
    std::fs::write(&file, HELLO).unwrap();
    let output = boitata(home.path())
        .args(["run", "t", "--param", "colour=blue", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("param \"who\" is required: set it with --param who=VALUE"),
        "{stderr}"
    );
    assert!(
        stderr.contains("param \"colour\" is not declared"),
        "{stderr}"
    );

    let output = boitata(home.path())
        .args(["run", "t", "--blueprint", "no-such-blueprint"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("no blueprint named \"no-such-blueprint\""));

    let output = boitata(home.path())
        .args(["run", "t", "--param", "novalue", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));

    let listed = boitata(home.path())
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap_or_default();
    assert!(
        runs.as_array().is_none_or(|r| r.is_empty()),
        "no run may be recorded: {runs}"
    );
}

#[test]
fn an_invalid_blueprint_never_starts_a_run() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("bad.yaml");
    std::fs::write(
        &file,
        "name: bad\nentry: a\nnodes:\n  a: { type: exec, comand: \"touch ran\" }\n",
    )
    .unwrap();
    let output = boitata(home.path())
        .args(["run", "t", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown field \"comand\""), "{stderr}");
    assert!(!home.path().join("ran").exists());
}

/// Live (non-zombie) processes in process group `pgid`, from /proc.
fn live_processes_in_group(pgid: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn ctrl_c_during_a_host_exec_cancels_the_run_kills_its_processes_and_exits_130() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("long.yaml");
    std::fs::write(
        &file,
        "name: long\nentry: sleep\nnodes:\n  sleep: { type: exec, command: \"sleep 1000 & echo $$; sleep 1000\" }\n  after: { type: exec, command: \"touch after\" }\nedges:\n  - { from: sleep, to: after }\n",
    )
    .unwrap();
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("boitata"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("BOITATA_DATA_DIR", home.path().join("data"))
        .current_dir(home.path())
        .args(["run", "wait", "--json", "--blueprint"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen: Vec<Event> = Vec::new();
    let mut pgid = None;
    for line in lines.by_ref() {
        let event: Event = serde_json::from_str(&line.unwrap()).unwrap();
        if let EventPayload::ExecOutput { chunk, .. } = &event.payload {
            pgid = chunk.trim().parse::<i32>().ok();
        }
        seen.push(event);
        if pgid.is_some() {
            break;
        }
    }
    let pgid = pgid.expect("the command printed its pid");
    assert!(
        live_processes_in_group(pgid).len() >= 2,
        "the shell and its sleeps run"
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    for line in lines {
        seen.push(serde_json::from_str(&line.unwrap()).unwrap());
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(matches!(
        seen.last().unwrap().payload,
        EventPayload::RunFinished {
            status: RunStatus::Cancelled,
            ..
        }
    ));
    assert!(!home.path().join("after").exists(), "the walk stopped");

    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_processes_in_group(pgid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        live_processes_in_group(pgid),
        Vec::<i32>::new(),
        "left running"
    );

    let value = stored(home.path(), &seen[0].run_id);
    assert_eq!(value["run"]["status"], "cancelled");
    let stored_events: Vec<Event> = serde_json::from_value(value["events"].clone()).unwrap();
    assert!(matches!(
        stored_events.last().unwrap().payload,
        EventPayload::RunFinished {
            status: RunStatus::Cancelled,
            ..
        }
    ));
}

#[test]
fn output_written_in_pieces_is_shown_as_whole_lines() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("dots.yaml");
    std::fs::write(
        &file,
        r#"name: dots
entry: dots
nodes:
  dots: { type: exec, command: "printf .; sleep 0.3; printf .; sleep 0.3; echo F; printf 'no newline at the end'" }
"#,
    )
    .unwrap();
    let output = boitata(home.path())
        .args(["run", "t", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("  │ ..F\n"), "{stderr}");
    assert!(
        stderr.contains("  │ no newline at the end\n✓ dots succeeded"),
        "{stderr}"
    );
}
