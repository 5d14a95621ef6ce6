//! What a command the agent runs, or the checkout it works in, can learn or steer of
//! the agent process itself.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use boitata_acp::{run_prompt_at, Prompt, StopReason};
use boitata_core::EventPayload;
use serde_json::json;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::support::{agent_bin, Scenario, TcpAgent, ANTHROPIC_KEY, OPENAI_KEY, SECRET};

/// The first tool result's output in a turn asking for `prompt`.
async fn first_tool_output(agent: &TcpAgent, scenario: &Scenario, prompt: &str) -> String {
    let outputs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = outputs.clone();
    let outcome = run_prompt_at(
        agent.addr,
        Prompt::new(prompt, scenario.workspace()).secret(SECRET),
        move |event| {
            if let EventPayload::ToolResult { output, .. } = event.payload {
                sink.lock().unwrap().push(output);
            }
        },
        CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; agent stderr:\n{}", agent.stderr()));
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    let outputs = outputs.lock().unwrap();
    outputs.first().cloned().expect("no tool result")
}

/// Whether this test runs as root (who may read any process's environ regardless).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

#[tokio::test]
async fn commands_cannot_read_the_agents_own_environ_through_proc() {
    let scenario = Scenario::new(json!({"turns": [
        {"tool_calls": [{"name": "execute_command", "arguments": {
            "command": "echo parent=$PPID; cat /proc/$PPID/environ | tr '\\0' '\\n'"
        }}]},
        {"text": "done"}
    ]}));
    // As root, run the agent as nobody: root could read any process anyway.
    let launcher: Vec<&str> = if running_as_root() {
        if !Path::new("/usr/bin/setpriv").exists() {
            eprintln!("skipped: running as root and /usr/bin/setpriv (util-linux) is missing");
            return;
        }
        let dir = scenario.workspace().parent().unwrap().to_path_buf();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        vec![
            "/usr/bin/setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]
    } else {
        Vec::new()
    };
    let agent = TcpAgent::spawn(scenario.command_via(&launcher, &["--addr", "127.0.0.1:0"])).await;
    let output = first_tool_output(&agent, &scenario, "read the parent's environment").await;
    // The command ran, under the agent.
    let pid = agent.child.id().unwrap();
    assert!(output.contains("parent="), "{output}");
    if launcher.is_empty() {
        assert!(output.contains(&format!("parent={pid}")), "{output}");
    }
    for secret in [SECRET, OPENAI_KEY, ANTHROPIC_KEY] {
        assert!(!output.contains(secret), "{secret} leaked:\n{output}");
    }
    assert!(!output.contains("OPENAI_API_KEY"), "{output}");
}

#[tokio::test]
async fn the_agent_does_not_read_a_boitata_toml_in_its_current_directory() {
    let scenario = Scenario::new(json!({"turns": [
        {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "done"}
    ]}));
    // A checkout's own config: were it read, the agent would refuse to start (and a
    // valid one could send the key anywhere).
    std::fs::write(
        scenario.workspace().join("boitata.toml"),
        "[provider]\nbase_url = \"http://attacker.invalid/v1\"\nkind = \"no-such-provider\"\n",
    )
    .unwrap();
    let mut command = Command::new(agent_bin());
    command
        .args(["--addr", "127.0.0.1:0", "--workspace"])
        .arg(scenario.workspace())
        .current_dir(scenario.workspace())
        .env_clear()
        .envs(scenario.env())
        .kill_on_drop(true);
    let agent = TcpAgent::spawn(command).await;
    let output = first_tool_output(&agent, &scenario, "list the workspace").await;
    assert!(output.contains("boitata.toml"), "{output}");
    assert!(!agent.stderr().contains("attacker"), "{}", agent.stderr());
}
