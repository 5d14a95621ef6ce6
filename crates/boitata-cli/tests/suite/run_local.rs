//! `boitata run` end to end through the built binary, with the scripted provider on a
//! real git repository in a temp dir.

use std::path::Path;
use std::process::Command as StdCommand;

use assert_cmd::Command;
use boitata_core::{Event, EventPayload, RunStatus};
use boitata_test_support::repo::TempRepo;

fn boitata(data_dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("boitata").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", data_dir)
        .env("BOITATA_DATA_DIR", data_dir);
    cmd
}

fn write_script(dir: &Path) -> std::path::PathBuf {
    let script = serde_json::json!({
        "turns": [
            { "text": "Writing notes.", "tool_calls": [
                { "name": "file_write", "arguments": { "path": "docs/NOTES.md", "content": "hello wrold\n" } } ] },
            { "tool_calls": [
                { "name": "file_edit", "arguments": { "path": "docs/NOTES.md", "old_string": "wrold", "new_string": "world" } } ] },
            { "tool_calls": [
                { "name": "execute_command", "arguments": { "command": "cat docs/NOTES.md && echo done-marker" } } ] },
            { "tool_calls": [
                { "name": "git_commit", "arguments": { "message": "Add notes", "all": true } } ] },
            { "text": "Added docs/NOTES.md and committed it." }
        ]
    });
    let path = dir.join("script.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&script).unwrap()).unwrap();
    path
}

#[test]
fn scripted_run_writes_edits_runs_and_commits_and_records_every_event() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let script = write_script(data.path());

    let output = boitata(data.path())
        .args([
            "run",
            "add notes",
            "--json",
            "--provider",
            "scripted",
            "--workspace",
        ])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    // The commit exists, with the edited file.
    let log = StdCommand::new("git")
        .args(["log", "--format=%s", "-n", "1"])
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "Add notes");
    let shown = StdCommand::new("git")
        .args(["show", "HEAD:docs/NOTES.md"])
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&shown.stdout), "hello world\n");

    // --json: every line is an Event; seq dense from 1; run_started first, run_finished last.
    let stdout = String::from_utf8(output.stdout).unwrap();
    let events: Vec<Event> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not an event: {l}: {e}")))
        .collect();
    assert!(events.len() >= 10, "{stdout}");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
    }
    assert!(
        matches!(&events[0].payload, EventPayload::RunStarted { provider: Some(p), .. } if p == "scripted")
    );
    assert!(matches!(
        events.last().unwrap().payload,
        EventPayload::RunFinished {
            status: RunStatus::Succeeded,
            ..
        }
    ));
    let tools: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ToolCall { tool, .. } => Some(tool.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        tools,
        ["file_write", "file_edit", "execute_command", "git_commit"]
    );
    let command_output = events.iter().find_map(|e| match &e.payload {
        EventPayload::ToolResult {
            tool,
            output,
            ok: true,
            ..
        } if tool == "execute_command" => Some(output.clone()),
        _ => None,
    });
    assert!(command_output.unwrap().contains("hello world"));

    // The run and the same events are in the store.
    let run_id = &events[0].run_id;
    let shown = boitata(data.path())
        .args(["runs", "show", run_id, "--json"])
        .output()
        .unwrap();
    assert_eq!(shown.status.code(), Some(0));
    let value: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(value["run"]["status"], "succeeded");
    let stored: Vec<Event> = serde_json::from_value(value["events"].clone()).unwrap();
    assert_eq!(stored, events);

    let listed = boitata(data.path())
        .args(["runs", "list"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains(run_id.as_str()));
}

#[test]
fn human_output_says_scripted_and_prints_the_final_message_on_stdout() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let script = write_script(data.path());
    let output = boitata(data.path())
        .args(["run", "add notes", "--provider", "scripted", "--workspace"])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "Added docs/NOTES.md and committed it."
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("scripted provider"), "{stderr}");
    assert!(stderr.contains("→ file_write docs/NOTES.md"), "{stderr}");
}

#[test]
fn openai_without_a_key_is_one_clear_line_and_exit_2() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let output = boitata(data.path())
        .args(["run", "anything", "--provider", "openai", "--workspace"])
        .arg(repo.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

#[test]
fn a_script_that_runs_out_fails_the_run_with_exit_1() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let script = data.path().join("short.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"tool_calls":[{"name":"list_dir","arguments":{}}]}]}"#,
    )
    .unwrap();
    let output = boitata(data.path())
        .args([
            "run",
            "x",
            "--json",
            "--provider",
            "scripted",
            "--workspace",
        ])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let last = String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let event: Event = serde_json::from_str(&last).unwrap();
    assert!(matches!(
        event.payload,
        EventPayload::RunFinished {
            status: RunStatus::Failed,
            error: Some(_)
        }
    ));
}

#[test]
fn ctrl_c_during_a_long_command_cancels_the_run_kills_the_command_and_exits_130() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let marker = format!("sleep 1000.{}", std::process::id());
    let script = data.path().join("sleep.json");
    std::fs::write(
        &script,
        serde_json::json!({ "turns": [
            { "tool_calls": [ { "name": "execute_command",
                "arguments": { "command": marker } } ] },
            { "text": "never reached" }
        ]})
        .to_string(),
    )
    .unwrap();
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("boitata"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", data.path())
        .env("BOITATA_DATA_DIR", data.path())
        .args([
            "run",
            "sleep",
            "--json",
            "--provider",
            "scripted",
            "--workspace",
        ])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let event: Event = serde_json::from_str(&line).unwrap();
        let is_call = matches!(event.payload, EventPayload::ToolCall { .. });
        seen.push(event);
        if is_call {
            break;
        }
    }
    // Give the command a moment to start, then Ctrl-C.
    std::thread::sleep(std::time::Duration::from_millis(500));
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
    let survivors = StdCommand::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(
        survivors.stdout.is_empty(),
        "left running: {}",
        String::from_utf8_lossy(&survivors.stdout)
    );
    let shown = boitata(data.path())
        .args(["runs", "show", &seen[0].run_id, "--json"])
        .output()
        .unwrap();
    let value: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(value["run"]["status"], "cancelled");
}

#[test]
fn script_alone_selects_the_scripted_provider_and_failed_commands_show_their_exit_code() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let script = data.path().join("fail.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"tool_calls":[{"name":"execute_command","arguments":{"command":"echo boom; exit 3"}}]},{"text":"saw it fail"}]}"#,
    )
    .unwrap();
    let output = boitata(data.path())
        .args(["run", "x", "--workspace"])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("⚠ exit 3"), "{stderr}");
}

#[test]
fn runs_show_takes_prefixes_literally_and_read_commands_create_no_store() {
    let data = tempfile::tempdir().unwrap();
    let store_dir = data.path().join("never-created");
    let listed = boitata(&store_dir).args(["runs", "list"]).output().unwrap();
    assert_eq!(listed.status.code(), Some(0));
    assert!(
        !store_dir.join("boitata.db").exists(),
        "a read command created the store"
    );

    // Two runs, then prefixes that SQL LIKE would treat as wildcards.
    let repo = TempRepo::new();
    let script = data.path().join("s.json");
    std::fs::write(&script, r#"{"turns":[{"text":"hi"}]}"#).unwrap();
    for _ in 0..2 {
        let out = boitata(data.path())
            .args(["run", "x", "--workspace"])
            .arg(repo.path())
            .arg("--script")
            .arg(&script)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
    }
    for prefix in ["%", "_", "", "'"] {
        let out = boitata(data.path())
            .args(["runs", "show", prefix])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{prefix:?}: {stderr}");
        assert!(stderr.contains("no run"), "{prefix:?}: {stderr}");
    }
    // Both ids share their leading characters (UUID v7 time prefix).
    let out = boitata(data.path())
        .args(["runs", "show", "0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ambiguous: matches 2 runs"), "{stderr}");
}

/// The bytes that make a terminal act: ESC (every escape sequence starts with it),
/// BEL (ends OSC strings) and CSI/OSC as C1 characters.
fn assert_no_terminal_controls(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    assert!(
        !text.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{9d}']),
        "{what} carries terminal control characters: {text:?}"
    );
}

#[test]
fn escape_sequences_from_the_model_commands_and_task_never_reach_the_terminal() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let script = data.path().join("escapes.json");
    let hostile = "hi \u{1b}]52;c;ZWNobyBwd25lZA==\u{7}\u{1b}[2J\u{1b}]0;title\u{7}\u{9b}2J there";
    let script_json = serde_json::json!({
        "turns": [
            { "text": hostile, "tool_calls": [
                { "name": "execute_command", "arguments": {
                    "command": "printf 'out \\033]52;c;aGk=\\007\\033[2J\\033]0;t\\007shown\\n'; printf 'err \\033[31m\\233red\\n' >&2; exit 4" } } ] },
            { "tool_calls": [
                { "name": "file_read", "arguments": { "path": "no\u{1b}[2Jsuch" } } ] },
            { "text": "done" }
        ]
    });
    std::fs::write(&script, serde_json::to_vec(&script_json).unwrap()).unwrap();
    let output = boitata(data.path())
        .args(["run", "task \u{1b}]0;title\u{7}here", "--workspace"])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_no_terminal_controls("run stderr", &output.stderr);
    assert!(stderr.contains("agent: hi  there"), "{stderr}");

    let listed = boitata(data.path())
        .args(["runs", "list"])
        .output()
        .unwrap();
    assert_eq!(listed.status.code(), Some(0));
    assert_no_terminal_controls("runs list", &listed.stdout);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("task here"),
        "{}",
        String::from_utf8_lossy(&listed.stdout)
    );

    let json = boitata(data.path())
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap().to_owned();
    // `--json` keeps the text exact (JSON escapes the control characters).
    assert_eq!(runs[0]["task"], "task \u{1b}]0;title\u{7}here");

    let shown = boitata(data.path())
        .args(["runs", "show", &id])
        .output()
        .unwrap();
    let shown_text = String::from_utf8_lossy(&shown.stdout);
    assert_eq!(shown.status.code(), Some(0), "{shown_text}");
    assert_no_terminal_controls("runs show", &shown.stdout);
    assert_no_terminal_controls("runs show stderr", &shown.stderr);
    assert!(shown_text.contains("agent: hi  there"), "{shown_text}");
}

#[test]
fn a_boitata_toml_in_the_current_directory_may_not_send_the_key_elsewhere() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(
        repo.path().join("boitata.toml"),
        "[provider]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let output = boitata(data.path())
        .current_dir(repo.path())
        .env("OPENAI_API_KEY", "sk-test-not-for-that-server-123456")
        .args(["run", "fix it"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("BOITATA_BASE_URL"), "{stderr}");
    assert!(!stderr.contains("sk-test-not-for-that-server"), "{stderr}");
}

#[test]
fn secrets_in_the_task_are_not_stored_in_the_run_row() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let script = data.path().join("s.json");
    std::fs::write(&script, r#"{"turns":[{"text":"ok"}]}"#).unwrap();
    let output = boitata(data.path())
        .args([
            "run",
            "use sk-test-secret-123456789abcdef please",
            "--workspace",
        ])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let listed = boitata(data.path())
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(!text.contains("sk-test-secret-123456789abcdef"), "{text}");
    assert!(text.contains("[REDACTED]"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_false_sends_whole_requests_and_a_bad_value_is_refused() {
    let model = boitata_test_support::FakeModel::openai().await;
    model
        .push(boitata_test_support::openai::completion(
            serde_json::json!({"role": "assistant", "content": "all done"}),
            "stop",
        ))
        .await;
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let base_url = model.base_url();
    let run = |stream: &str| {
        let mut cmd = boitata(data.path());
        cmd.env("BOITATA_BASE_URL", &base_url)
            .args(["run", "hi", "--provider", "openai", "--stream", stream])
            .arg("--workspace")
            .arg(repo.path());
        tokio::task::block_in_place(|| cmd.output().unwrap())
    };
    let output = run("false");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "all done");
    let bodies = model.bodies().await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["stream"], false, "{}", bodies[0]);
    assert_eq!(bodies[0]["tool_choice"], "auto", "{}", bodies[0]);

    let output = run("sometimes");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("use true, false or auto"), "{stderr}");
}

/// Every bidirectional control the CLI must show rather than obey.
const BIDI: [char; 12] = [
    '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}',
    '\u{2069}', '\u{200e}', '\u{200f}', '\u{061c}',
];

fn assert_no_bidi(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    assert!(
        !text.contains(BIDI),
        "{what} carries bidi controls: {text:?}"
    );
}

#[test]
fn bidi_controls_from_the_model_commands_and_task_are_shown_visibly() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let script = data.path().join("bidi.json");
    let script_json = serde_json::json!({
        "turns": [
            { "text": "safe\u{202e}txt.exe gnp\u{202c} ok", "tool_calls": [
                { "name": "execute_command", "arguments": {
                    "command": "printf 'out \\342\\200\\256x\\n'; echo \u{2067}cmd" } } ] },
            { "tool_calls": [
                { "name": "search", "arguments": { "pattern": "a\u{200f}b", "path": "." } } ] },
            { "text": "final \u{202e}gnp.exe" }
        ]
    });
    std::fs::write(&script, serde_json::to_vec(&script_json).unwrap()).unwrap();
    let output = boitata(data.path())
        .args(["run", "task \u{2066}here", "--workspace"])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_no_bidi("run stderr", &output.stderr);
    assert!(
        stderr.contains("agent: safe<U+202E>txt.exe gnp<U+202C> ok"),
        "{stderr}"
    );
    // The tool-call summary lines.
    assert!(stderr.contains("echo <U+2067>cmd"), "{stderr}");
    assert!(stderr.contains(r#"→ search "a<U+200F>b" in ."#), "{stderr}");
    // Piped stdout is exact: a program reads it.
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "final \u{202e}gnp.exe"
    );

    let json = boitata(data.path())
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let id = runs[0]["id"].as_str().unwrap().to_owned();
    for args in [vec!["runs", "show", id.as_str()], vec!["runs", "list"]] {
        let shown = boitata(data.path()).args(&args).output().unwrap();
        let text = String::from_utf8_lossy(&shown.stdout);
        assert_eq!(shown.status.code(), Some(0), "{text}");
        assert_no_bidi(&args.join(" "), &shown.stdout);
        assert!(text.contains("task <U+2066>here"), "{args:?}: {text}");
    }
}

#[test]
fn a_run_as_root_warns_once_on_stderr() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let script = data.path().join("script.json");
    std::fs::write(&script, r#"{"turns": [{"text": "nothing to do"}]}"#).unwrap();
    let output = boitata(data.path())
        .args(["run", "look", "--provider", "scripted", "--workspace"])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expected = usize::from(boitata_tools::process::running_as_root());
    assert_eq!(
        stderr.matches("warning: boitata runs as root").count(),
        expected,
        "{stderr}"
    );
}

#[test]
fn a_config_budget_stops_the_in_process_agent_with_the_event_and_exit_1() {
    let repo = TempRepo::new();
    let data = tempfile::tempdir().unwrap();
    let script = write_script(data.path());
    let config = data.path().join("budget.toml");
    std::fs::write(&config, "[budget]\nrequests = 2\n").unwrap();
    let output = boitata(data.path())
        .args(["run", "x", "--json", "--config"])
        .arg(&config)
        .args(["--provider", "scripted", "--workspace"])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = super::sandbox_support::events(&output.stdout);
    let tool_calls = events
        .iter()
        .filter(|e| e.payload.kind() == "tool_call")
        .count();
    assert_eq!(tool_calls, 2, "two model requests were answered, no third");
    let spent: Vec<&Event> = events
        .iter()
        .filter(|e| e.payload.kind() == "budget_exceeded")
        .collect();
    assert_eq!(spent.len(), 1, "{events:#?}");
    let line = spent[0].to_json_line();
    assert!(
        line.contains(r#""budget":"requests","used":3,"limit":2"#),
        "{line}"
    );
    match &events.last().unwrap().payload {
        EventPayload::RunFinished {
            status: RunStatus::Failed,
            error: Some(error),
        } => assert_eq!(error, "budget exceeded: requests 3 > 2"),
        other => panic!("{other:?}"),
    }

    // Without the budget the same script runs to its end.
    let free = boitata(data.path())
        .args([
            "run",
            "x",
            "--json",
            "--provider",
            "scripted",
            "--workspace",
        ])
        .arg(repo.path())
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert_eq!(free.status.code(), Some(0));
}
