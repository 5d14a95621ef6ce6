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
    cancel_a_host_exec_with(nix::sys::signal::Signal::SIGINT);
}

/// A closed terminal (SIGHUP) is a cancellation like Ctrl-C: teardown runs, the run
/// is recorded `cancelled`, nothing is left running.
#[test]
fn sighup_during_a_host_exec_cancels_the_run_like_ctrl_c() {
    cancel_a_host_exec_with(nix::sys::signal::Signal::SIGHUP);
}

/// Runs a host blueprint whose command sleeps, sends `signal` once it runs, and
/// checks the run ends `cancelled` with exit 130 and its processes gone.
fn cancel_a_host_exec_with(signal: nix::sys::signal::Signal) {
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

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    for line in lines {
        seen.push(serde_json::from_str(&line.unwrap()).unwrap());
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
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

/// `boitata run TASK ARGS...` in `home`, with the stdout, the stderr and the exit code.
fn run_in(home: &Path, args: &[&str]) -> (String, String, Option<i32>) {
    let output = boitata(home).arg("run").args(args).output().unwrap();
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.code(),
    )
}

fn no_run_recorded(home: &Path) {
    let listed = boitata(home)
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
fn every_reason_a_run_cannot_start_is_reported_at_once() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("sandboxed.yaml");
    std::fs::write(
        &file,
        r#"name: sandboxed
entry: box
params:
  repo: { description: "the repository" }
nodes:
  box: { type: provision, image: "boitata-base:bookworm" }
  code: { type: checkout, container: "{box}", repo: "{params.repo}" }
edges:
  - { from: box, to: code }
"#,
    )
    .unwrap();
    let output = boitata(home.path())
        .env(
            "DOCKER_HOST",
            "unix:///nonexistent/boitata-cli-test/docker.sock",
        )
        .args(["run", "t", "--param", "colour=red", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines[0], "error: blueprint \"sandboxed\" cannot run (3 problems):",
        "{stderr}"
    );
    assert_eq!(
        lines[1], "  - param \"colour\" is not declared (params: repo)",
        "{stderr}"
    );
    assert_eq!(
        lines[2], "  - param \"repo\" is required: set it with --param repo=VALUE (the repository)",
        "{stderr}"
    );
    assert!(
        lines[3].starts_with("  - cannot reach the Docker daemon at unix:///nonexistent/"),
        "{stderr}"
    );
    assert_eq!(lines.len(), 4, "{stderr}");
    no_run_recorded(home.path());
}

#[test]
fn a_param_without_a_blueprint_or_set_twice_is_a_usage_error() {
    let home = tempfile::tempdir().unwrap();
    let (_, stderr, code) = run_in(home.path(), &["t", "--param", "repo=a"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.starts_with("error: --param needs --blueprint"),
        "{stderr}"
    );

    let file = home.path().join("hello.yaml");
    std::fs::write(&file, HELLO).unwrap();
    let file = file.display().to_string();
    let (_, stderr, code) = run_in(
        home.path(),
        &[
            "t",
            "--blueprint",
            &file,
            "--param",
            "who=a",
            "--param",
            "who=b",
        ],
    );
    assert_eq!(code, Some(2));
    assert_eq!(
        stderr,
        "error: --param who is given 2 times: give each param once\n"
    );
    no_run_recorded(home.path());
}

#[test]
fn warnings_before_a_run_are_one_line_each() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("island.yaml");
    std::fs::write(
        &file,
        "name: island\nentry: a\nnodes:\n  a: { type: exec, command: \"echo ran\" }\n  b: { type: exec, command: \"true\" }\n",
    )
    .unwrap();
    let (stdout, stderr, code) = run_in(
        home.path(),
        &["t", "--blueprint", &file.display().to_string()],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "ran\n");
    let first = stderr.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "{}:5:3: warning: node \"b\" is unreachable from entry \"a\": add an edge to it, or remove it",
            file.display()
        ),
        "{stderr}"
    );
    assert!(!stderr.contains('╭'), "no drawing: {stderr}");
}

#[test]
fn command_output_is_shown_by_line_however_it_arrives() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("chunks.yaml");
    // Three writes make three chunks: 'sh: 1: ', 'not found', '\n'; then a last line
    // on stderr without a line break.
    std::fs::write(
        &file,
        r#"name: chunks
entry: a
nodes:
  a:
    type: exec
    command: "printf 'sh: 1: '; sleep 0.2; printf './run-tests.sh: not found'; sleep 0.2; echo; printf 'no line break' >&2"
"#,
    )
    .unwrap();
    let (_, stderr, code) = run_in(
        home.path(),
        &["t", "--blueprint", &file.display().to_string()],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("▶ a (exec)"))
        .unwrap();
    assert_eq!(
        lines[start + 1..start + 5],
        [
            "  $ printf 'sh: 1: '; sleep 0.2; printf './run-tests.sh: not found'; sleep 0.2; echo; printf 'no line break' >&2",
            "  │ sh: 1: ./run-tests.sh: not found",
            "  ┆ no line break",
            "✓ a succeeded (exit 0)",
        ],
        "{stderr}"
    );
}

#[test]
fn node_started_shows_what_the_node_runs_after_templating() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("hello.yaml");
    std::fs::write(&file, HELLO).unwrap();
    let (stdout, stderr, code) = run_in(
        home.path(),
        &[
            "the task",
            "--blueprint",
            &file.display().to_string(),
            "--param",
            "who=world",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "HELLO WORLD!\nthe task\n");
    assert!(
        stderr.contains("▶ greet (exec)\n  $ echo hello world!\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("▶ shout (exec)\n  $ echo 'hello world!' | tr a-z A-Z; echo 'the task'\n"),
        "{stderr}"
    );
}

#[test]
fn a_failing_agent_node_says_why_and_its_own_max_turns_beats_the_flag() {
    let home = tempfile::tempdir().unwrap();
    let busy = serde_json::json!({ "tool_calls": [
        { "name": "list_dir", "arguments": { "path": "." } } ] });
    let script = home.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::to_vec(&serde_json::json!({ "turns": [busy, busy, busy] })).unwrap(),
    )
    .unwrap();
    let file = home.path().join("fix.yaml");
    std::fs::write(
        &file,
        "name: fix\nentry: fix\nnodes:\n  fix: { type: agent, prompt: \"go\", max_turns: 2 }\n",
    )
    .unwrap();
    let (_, stderr, code) = run_in(
        home.path(),
        &[
            "t",
            "--blueprint",
            &file.display().to_string(),
            "--provider",
            "scripted",
            "--script",
            &script.display().to_string(),
            "--max-turns",
            "1",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let why = "the agent used all 2 turns without finishing (raise max_turns on the node)";
    assert!(
        stderr.contains(&format!("✗ fix failed: {why}\n")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("the last node, \"fix\", failed: {why}\n")),
        "{stderr}"
    );

    let help = boitata(home.path())
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).replace('\n', " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("agent nodes without their own max_turns: a node's max_turns wins"),
        "{help}"
    );
}

/// The pattern docs/blueprints.md recommends: a placeholder passed through `env` and
/// quoted in the command is data, never shell code (pasted into the command, the same
/// task would run).
#[test]
fn a_task_passed_through_env_is_not_run_as_shell_code() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("safe.yaml");
    std::fs::write(
        &file,
        "name: safe\nentry: say\nnodes:\n  say: { type: exec, env: { TASK: \"{task}\" }, command: 'printf \"%s\\n\" \"$TASK\"' }\n",
    )
    .unwrap();
    let task = "$(touch pwned); `touch pwned2` \"'";
    let (stdout, stderr, code) =
        run_in(home.path(), &[task, "--blueprint", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim_end(), task);
    assert!(!home.path().join("pwned").exists());
    assert!(!home.path().join("pwned2").exists());
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

#[test]
fn an_agent_blueprint_without_a_key_is_refused_before_anything_runs() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("agentic.yaml");
    std::fs::write(
        &file,
        "name: agentic\nentry: first\nnodes:\n  first: { type: exec, command: \"touch ran-first\" }\n  fix: { type: agent, prompt: \"fix it\" }\nedges:\n  - { from: first, to: fix }\n",
    )
    .unwrap();
    let (_, stderr, code) = run_in(
        home.path(),
        &[
            "t",
            "--provider",
            "openai",
            "--blueprint",
            &file.display().to_string(),
        ],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
    assert!(
        stderr.contains("agent nodes need a model provider"),
        "{stderr}"
    );
    assert!(
        !home.path().join("ran-first").exists(),
        "a node ran before the check"
    );
    no_run_recorded(home.path());
}
