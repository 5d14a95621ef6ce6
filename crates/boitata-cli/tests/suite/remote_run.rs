//! `boitata run --remote` against a real `boitata-server` process: the same events,
//! human output and exit codes as the same blueprint run locally; the token; Ctrl-C.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use boitata_core::{Event, EventPayload};
use boitata_test_support::server::{workspace_binary, ServerProcess};

const TWO_STEPS: &str = r#"name: two_steps
description: greets, then shouts
entry: greet
params:
  who: { default: "world" }
nodes:
  greet: { type: exec, command: "echo hello {params.who}; echo 'a note' >&2" }
  shout: { type: exec, command: "echo '{greet}' | tr a-z A-Z; echo '{task}'" }
edges:
  - { from: greet, when: success, to: shout }
"#;

const FAILS: &str = r#"name: fails
entry: check
nodes:
  check: { type: exec, command: "echo checking; exit 3" }
"#;

const LONG: &str = r#"name: long
entry: wait
nodes:
  wait: { type: exec, command: "echo started; sleep 1000.7171" }
"#;

/// A server offering the blueprints above, from `home/blueprints`.
fn server(home: &Path, token: Option<&str>) -> ServerProcess {
    let blueprints = home.join("blueprints");
    std::fs::create_dir_all(&blueprints).unwrap();
    for (file, yaml) in [
        ("two_steps.yaml", TWO_STEPS),
        ("fails.yaml", FAILS),
        ("long.yaml", LONG),
    ] {
        std::fs::write(blueprints.join(file), yaml).unwrap();
    }
    let mut builder = ServerProcess::builder(workspace_binary("boitata-server"))
        .arg("--blueprints-dir")
        .arg(&blueprints)
        .arg("--data-dir")
        .arg(home.join("server-data"));
    if let Some(token) = token {
        builder = builder.env("BOITATA_API_TOKEN", token);
    }
    builder.start()
}

fn boitata(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("boitata").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("BOITATA_DATA_DIR", home.join("local-data"))
        .current_dir(home);
    cmd
}

fn events(stdout: &[u8]) -> Vec<Event> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// Each event's type and node, and each node's whole output, which do not depend on
/// where the run ran.
/// `(type, node)` of every event but output; `(node:stream, text)` of the output.
type Shape = (Vec<(String, Option<String>)>, Vec<(String, String)>);

fn shape(events: &[Event]) -> Shape {
    let kinds = events
        .iter()
        .filter(|e| e.payload.kind() != "exec_output")
        .map(|e| (e.payload.kind().to_owned(), e.node.clone()))
        .collect();
    let mut output: Vec<(String, String)> = Vec::new();
    for e in events {
        if let EventPayload::ExecOutput { chunk, stream } = &e.payload {
            let key = format!("{}:{stream:?}", e.node.clone().unwrap_or_default());
            match output.iter_mut().find(|(k, _)| *k == key) {
                Some((_, text)) => text.push_str(chunk),
                None => output.push((key, chunk.clone())),
            }
        }
    }
    // stdout and stderr are two pipes read concurrently: which comes first varies.
    output.sort();
    (kinds, output)
}

/// Human progress without what differs between two runs: the id, the timing, and the
/// interleaving of a command's stdout and stderr (two pipes, read concurrently).
fn normalized(stderr: &[u8], run_id: &str) -> String {
    let text = String::from_utf8_lossy(stderr).replace(run_id, "RUN");
    let mut lines: Vec<String> = Vec::new();
    let mut output: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("  │") || line.starts_with("  ┆") {
            output.push(line.to_owned());
            continue;
        }
        output.sort();
        lines.append(&mut output);
        lines.push(match line.rfind(" in ") {
            Some(at) if line.contains("● run ") || line.contains("✗ run ") => {
                let (head, tail) = line.split_at(at);
                let rest = tail.split_once('s').map(|(_, r)| r).unwrap_or("");
                format!("{head} in Ns{rest}")
            }
            _ => line.to_owned(),
        });
    }
    output.sort();
    lines.append(&mut output);
    lines.join("\n")
}

fn run_id_of(events: &[Event]) -> String {
    events[0].run_id.clone()
}

#[test]
fn remote_and_local_runs_show_the_same_events_output_and_exit_codes() {
    let home = tempfile::tempdir().unwrap();
    let server = server(home.path(), None);
    let file = home.path().join("blueprints");

    for (name, task, expected_code) in [("two_steps", "the task", 0), ("fails", "check it", 1)] {
        let local = boitata(home.path())
            .args(["run", task, "--json", "--blueprint"])
            .arg(file.join(format!("{name}.yaml")))
            .output()
            .unwrap();
        let remote = boitata(home.path())
            .args([
                "run",
                task,
                "--json",
                "--blueprint",
                name,
                "--remote",
                server.url(),
            ])
            .output()
            .unwrap();
        assert_eq!(
            local.status.code(),
            Some(expected_code),
            "local: {}",
            String::from_utf8_lossy(&local.stderr)
        );
        assert_eq!(
            remote.status.code(),
            Some(expected_code),
            "remote: {}",
            String::from_utf8_lossy(&remote.stderr)
        );
        let (local_events, remote_events) = (events(&local.stdout), events(&remote.stdout));
        assert_eq!(shape(&local_events), shape(&remote_events), "{name}");
        assert_eq!(remote_events.last().unwrap().payload.kind(), "run_finished");
        let seqs: Vec<u64> = remote_events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=remote_events.len() as u64).collect::<Vec<_>>());

        // Human mode: the same lines on stderr, the same result on stdout.
        let local = boitata(home.path())
            .args(["run", task, "--blueprint"])
            .arg(file.join(format!("{name}.yaml")))
            .output()
            .unwrap();
        let remote = boitata(home.path())
            .args(["run", task, "--blueprint", name, "--remote", server.url()])
            .output()
            .unwrap();
        assert_eq!(local.status.code(), remote.status.code());
        assert_eq!(
            String::from_utf8_lossy(&local.stdout),
            String::from_utf8_lossy(&remote.stdout),
            "{name}: the final output"
        );
        let local_id = local_run_id(&local.stderr);
        let remote_id = local_run_id(&remote.stderr);
        assert_eq!(
            normalized(&local.stderr, &local_id),
            normalized(&remote.stderr, &remote_id),
            "{name}: human progress"
        );
        if name == "two_steps" {
            assert_eq!(
                String::from_utf8_lossy(&remote.stdout),
                "HELLO WORLD\nthe task\n"
            );
        }
    }
}

/// The run id from a human `● run ID started` line.
fn local_run_id(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.starts_with("● run ") && l.contains(" started"))
        .unwrap_or_else(|| panic!("no start line in:\n{text}"));
    line.split_whitespace().nth(2).unwrap().to_owned()
}

#[test]
fn params_go_to_the_server_and_its_refusals_are_usage_errors() {
    let home = tempfile::tempdir().unwrap();
    let server = server(home.path(), None);
    let output = boitata(home.path())
        .args([
            "run",
            "t",
            "--json",
            "--blueprint",
            "two_steps",
            "--param",
            "who=remote",
            "--remote",
            server.url(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let greeted = events(&output.stdout).iter().any(|e| {
        matches!(&e.payload, EventPayload::ExecOutput { chunk, .. } if chunk.contains("hello remote"))
    });
    assert!(greeted);

    for (args, message) in [
        (vec!["--blueprint", "nope"], "no blueprint named \"nope\""),
        (vec!["--blueprint", "../two_steps"], "never a path"),
        (
            vec!["--blueprint", "two_steps", "--param", "whom=x"],
            "not declared",
        ),
        (vec![], "--remote needs --blueprint NAME"),
    ] {
        let output = boitata(home.path())
            .args(["run", "t", "--remote", server.url()])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    let output = boitata(home.path())
        .args([
            "run",
            "t",
            "--blueprint",
            "two_steps",
            "--remote",
            "http://127.0.0.1:9",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("cannot reach the server at http://127.0.0.1:9"));
    let output = boitata(home.path())
        .args([
            "run",
            "t",
            "--blueprint",
            "two_steps",
            "--remote",
            server.url(),
            "--workspace",
            ".",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn the_token_comes_from_the_flag_or_the_environment() {
    let home = tempfile::tempdir().unwrap();
    let token = "cli-remote-token-42a7c9";
    let server = server(home.path(), Some(token));
    let base = ["run", "t", "--json", "--blueprint", "two_steps", "--remote"];

    let output = boitata(home.path())
        .args(base)
        .arg(server.url())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("needs an API token"));

    let output = boitata(home.path())
        .args(base)
        .arg(server.url())
        .args(["--token", "wrong-token-000000"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("refused the token"));

    let output = boitata(home.path())
        .args(base)
        .arg(server.url())
        .args(["--token", token])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let output = boitata(home.path())
        .args(base)
        .arg(server.url())
        .env("BOITATA_API_TOKEN", token)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&output.stdout).contains(token));
}

#[test]
fn ctrl_c_cancels_the_remote_run_and_exits_130() {
    let home = tempfile::tempdir().unwrap();
    let server = server(home.path(), None);
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("boitata"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .args([
            "run",
            "wait",
            "--json",
            "--blueprint",
            "long",
            "--remote",
            server.url(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(30);
    let run_id;
    loop {
        let Some(line) = lines.next() else {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            panic!(
                "the run printed no output; stderr:\n{stderr}\nserver log:\n{}",
                server.log()
            );
        };
        let line = line.unwrap();
        let event: Event = serde_json::from_str(&line).unwrap();
        if matches!(&event.payload, EventPayload::ExecOutput { chunk, .. } if chunk.contains("started"))
        {
            run_id = event.run_id;
            break;
        }
        assert!(Instant::now() < deadline);
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let rest: Vec<Event> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let EventPayload::RunFinished { status, .. } = &rest.last().unwrap().payload else {
        panic!("the stream should end with run_finished: {rest:?}")
    };
    assert_eq!(status.as_str(), "cancelled");

    let shown = boitata(home.path())
        .args(["runs", "show", &run_id, "--json", "--remote", server.url()])
        .output()
        .unwrap();
    assert_eq!(
        shown.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["run"]["status"], "cancelled");
}

#[test]
fn runs_list_and_show_read_the_servers_runs() {
    let home = tempfile::tempdir().unwrap();
    let server = server(home.path(), None);
    let output = boitata(home.path())
        .args([
            "run",
            "list me",
            "--json",
            "--blueprint",
            "two_steps",
            "--remote",
            server.url(),
        ])
        .output()
        .unwrap();
    let run_events = events(&output.stdout);
    let id = run_id_of(&run_events);

    let list = boitata(home.path())
        .args(["runs", "list", "--remote", server.url()])
        .output()
        .unwrap();
    assert_eq!(list.status.code(), Some(0));
    let text = String::from_utf8_lossy(&list.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.contains("succeeded") && row.contains("two_steps") && row.contains("list me"),
        "{row}"
    );

    let list = boitata(home.path())
        .args(["runs", "list", "--json", "--remote", server.url()])
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(runs[0]["id"], id.as_str());

    let show = boitata(home.path())
        .args(["runs", "show", &id[..13], "--remote", server.url()])
        .output()
        .unwrap();
    assert_eq!(show.status.code(), Some(0));
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains(&format!("run       {id}")) && text.contains("status    succeeded"),
        "{text}"
    );
    assert!(
        text.contains("▶ greet (exec)") && text.contains("│ HELLO WORLD"),
        "{text}"
    );

    let show = boitata(home.path())
        .args(["runs", "show", &id, "--json", "--remote", server.url()])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["events"].as_array().unwrap().len(), run_events.len());

    let missing = boitata(home.path())
        .args(["runs", "show", "no-such-run", "--remote", server.url()])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no run no-such-run"));
}
