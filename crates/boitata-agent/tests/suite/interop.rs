//! A client nobody on this project wrote: the official `agent-client-protocol` Python
//! SDK (PyPI) drives the binary through a whole turn, over TCP and over `--stdio`.
//!
//! The SDK lives in a virtualenv made by `scripts/setup-acp-python.sh`
//! (`$BOITATA_ACP_PY_VENV`, default `target/acp-py-venv`). Without it these tests skip
//! with a note, except under `CI=true`, where a missing venv fails them.

use std::path::PathBuf;
use std::process::Stdio;

use boitata_core::Event;
use serde_json::Value;

use super::support::{agent_bin, python_venv, Scenario, TcpAgent, PATIENCE, SECRET};
use super::tcp::list_then_answer;

/// The venv's python, or `None` (after saying why) when the tests should skip.
fn python() -> Option<PathBuf> {
    let python = python_venv().join("bin/python");
    if python.is_file() {
        return Some(python);
    }
    let reason = format!(
        "no ACP Python SDK venv at {}: run scripts/setup-acp-python.sh (or set BOITATA_ACP_PY_VENV)",
        python_venv().display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{reason}");
    }
    eprintln!("skipping: {reason}");
    None
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/acp_client.py")
}

/// Runs the Python client; its JSON report.
async fn run_client(mut command: tokio::process::Command) -> Value {
    let output = tokio::time::timeout(
        PATIENCE,
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python client did not finish")
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Python client failed ({}):\n{stderr}",
        output.status
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "the Python client printed no report ({e}):\n{}\n{stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// What every transport must show: a whole turn, as the SDK parsed it.
fn assert_full_turn(report: &Value) {
    assert_eq!(report["protocol_version"], 1, "{report}");
    assert_eq!(report["agent_name"], "boitata-agent", "{report}");
    assert_eq!(report["response"]["stopReason"], "end_turn", "{report}");
    assert_eq!(
        report["response"]["_meta"]["boitata"]["final_message"],
        "done: the workspace has README.md and hello.txt"
    );
    let updates: Vec<&Value> = report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| &u["update"])
        .collect();
    let kinds: Vec<&str> = updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect();
    for kind in ["agent_message_chunk", "tool_call", "tool_call_update"] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let call = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(call["kind"], "read", "{call}");
    assert_eq!(call["rawInput"]["path"], ".", "{call}");
    let done = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(done["toolCallId"], call["toolCallId"]);
    assert_eq!(done["status"], "completed", "{done}");
    // Every update carries its event; the SDK kept `_meta` intact.
    let events: Vec<Event> = updates
        .iter()
        .map(|u| serde_json::from_value(u["_meta"]["boitata"].clone()).unwrap())
        .collect();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn the_python_sdk_drives_a_turn_over_tcp() {
    let Some(python) = python() else { return };
    let scenario = Scenario::new(list_then_answer());
    let agent = TcpAgent::start(&scenario).await;
    let mut command = tokio::process::Command::new(python);
    command
        .arg(client_script())
        .args(["tcp", "--addr", &agent.addr.to_string(), "--cwd"])
        .arg(scenario.workspace())
        .args(["--prompt", "what is in the workspace?"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BOITATA_AGENT_SECRET", SECRET);
    let report = run_client(command).await;
    assert_eq!(report["auth_methods"][0], "boitata-secret", "{report}");
    assert_full_turn(&report);
    agent.terminate();
    assert_eq!(agent.exit_code().await, Some(0));
}

#[tokio::test]
async fn the_python_sdk_drives_a_turn_over_stdio() {
    let Some(python) = python() else { return };
    let scenario = Scenario::new(list_then_answer());
    let mut command = tokio::process::Command::new(python);
    command
        .arg(client_script())
        .args(["stdio", "--cwd"])
        .arg(scenario.workspace())
        .args([
            "--prompt",
            "what is in the workspace?",
            "--",
            agent_bin(),
            "--stdio",
            "--workspace",
        ])
        .arg(scenario.workspace())
        .arg("--config")
        .arg(scenario.config())
        .current_dir(scenario.workspace())
        .env_clear()
        .envs(scenario.env());
    let report = run_client(command).await;
    // The agent was started with a secret in its environment: the client presented it.
    assert_eq!(report["auth_methods"][0], "boitata-secret", "{report}");
    assert_full_turn(&report);
}

#[tokio::test]
async fn the_python_sdk_with_its_default_environment_is_told_the_key_is_missing() {
    let Some(python) = python() else { return };
    let scenario = Scenario::new(list_then_answer());
    let mut command = tokio::process::Command::new(python);
    command
        .arg(client_script())
        .args(["stdio", "--expect-refusal", "--default-env", "--cwd"])
        .arg(scenario.workspace())
        .args([
            "--prompt",
            "hi",
            "--",
            agent_bin(),
            "--stdio",
            "--workspace",
        ])
        .arg(scenario.workspace())
        .arg("--config")
        .arg(scenario.config())
        .current_dir(scenario.workspace())
        .env_clear()
        // The user's shell has a key; the SDK's default environment leaves it out.
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", scenario.workspace())
        .env("OPENAI_API_KEY", "sk-in-the-users-shell-only-0123456789");
    let report = run_client(command).await;
    assert_eq!(report["agent_name"], "boitata-agent", "{report}");
    assert_eq!(report["refused"]["code"], -32000, "{report}");
    let message = report["refused"]["message"].as_str().unwrap();
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
}
