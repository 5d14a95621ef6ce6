//! The binary over TCP, driven by `boitata_acp::run_prompt` with the scripted provider.

use boitata_acp::{run_prompt_at, Prompt, StopReason};
use boitata_core::{Event, EventPayload};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{Scenario, TcpAgent, ANTHROPIC_KEY, OPENAI_KEY, PATIENCE, SECRET};

/// Look at the workspace, then say what is in it.
pub(super) fn list_then_answer() -> serde_json::Value {
    json!({"turns": [
        {"text": "Let me look at the workspace.",
         "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "done: the workspace has README.md and hello.txt"}
    ]})
}

fn collect() -> (
    std::sync::Arc<std::sync::Mutex<Vec<Event>>>,
    impl FnMut(Event) + Send,
) {
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    (events, move |event| sink.lock().unwrap().push(event))
}

#[tokio::test]
async fn a_full_turn_over_tcp_then_sigterm_exits_0() {
    let scenario = Scenario::new(list_then_answer());
    let agent = TcpAgent::start(&scenario).await;
    let (events, on_event) = collect();
    let outcome = run_prompt_at(
        agent.addr,
        Prompt::new("what is in the workspace?", scenario.workspace()).secret(SECRET),
        on_event,
        CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; agent stderr:\n{}", agent.stderr()));
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(
        outcome.final_message,
        "done: the workspace has README.md and hello.txt"
    );
    let events = events.lock().unwrap().clone();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let result = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolResult {
                tool, ok, output, ..
            } if tool == "list_dir" => Some((*ok, output.clone())),
            _ => None,
        })
        .expect("no list_dir result among the events");
    assert!(result.0, "list_dir failed: {}", result.1);
    assert!(result.1.contains("hello.txt"), "{}", result.1);

    agent.terminate();
    assert_eq!(agent.exit_code().await, Some(0));
}

#[tokio::test]
async fn commands_the_agent_runs_see_neither_the_secret_nor_the_keys() {
    let scenario = Scenario::new(json!({"turns": [
        {"tool_calls": [{"name": "execute_command", "arguments": {"command": "env; cat /proc/self/environ | tr '\\0' '\\n'"}}]},
        {"text": "done"}
    ]}));
    let agent = TcpAgent::start(&scenario).await;
    let (events, on_event) = collect();
    let outcome = run_prompt_at(
        agent.addr,
        Prompt::new("print the environment", scenario.workspace()).secret(SECRET),
        on_event,
        CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; agent stderr:\n{}", agent.stderr()));
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    let output = events
        .lock()
        .unwrap()
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolResult { ok, output, .. } => Some((*ok, output.clone())),
            _ => None,
        })
        .expect("no tool result");
    assert!(output.0, "env failed: {}", output.1);
    // It ran (the allowlisted PATH is there) and leaked nothing.
    assert!(output.1.contains("PATH="), "{}", output.1);
    for secret in [SECRET, OPENAI_KEY, ANTHROPIC_KEY] {
        assert!(!output.1.contains(secret), "{secret} leaked:\n{}", output.1);
    }
    for name in [
        "BOITATA_AGENT_SECRET",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
    ] {
        assert!(!output.1.contains(name), "{name} leaked:\n{}", output.1);
    }
    // Nor does the agent's own log show them.
    let stderr = agent.stderr();
    for secret in [SECRET, OPENAI_KEY, ANTHROPIC_KEY] {
        assert!(!stderr.contains(secret), "{secret} in the agent's log");
    }
}

#[tokio::test]
async fn sigterm_mid_turn_cancels_the_turn_and_exits_0() {
    let scenario = Scenario::new(json!({"turns": [
        {"text": "This will take a while.",
         "tool_calls": [{"name": "execute_command", "arguments": {"command": "sleep 300"}}]},
        {"text": "never reached"}
    ]}));
    let agent = TcpAgent::start(&scenario).await;
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let mut started_tx = Some(started_tx);
    let on_event = move |event: Event| {
        if matches!(event.payload, EventPayload::ToolCall { .. }) {
            if let Some(tx) = started_tx.take() {
                let _ = tx.send(());
            }
        }
    };
    let turn = tokio::spawn(run_prompt_at(
        agent.addr,
        Prompt::new("wait", scenario.workspace()).secret(SECRET),
        on_event,
        CancellationToken::new(),
    ));
    tokio::time::timeout(PATIENCE, started_rx)
        .await
        .unwrap_or_else(|_| panic!("the command never started; stderr:\n{}", agent.stderr()))
        .unwrap();
    agent.terminate();
    let outcome = tokio::time::timeout(PATIENCE, turn)
        .await
        .expect("the turn did not end after SIGTERM")
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}; agent stderr:\n{}", agent.stderr()));
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    assert_eq!(agent.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_wrong_secret_gets_no_session_from_the_binary() {
    let scenario = Scenario::new(list_then_answer());
    let agent = TcpAgent::start(&scenario).await;
    let err = run_prompt_at(
        agent.addr,
        Prompt::new("hi", scenario.workspace()).secret("not-the-secret"),
        |_| {},
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, boitata_acp::AcpError::AuthenticationRefused { .. }),
        "{err:?}"
    );
    agent.terminate();
    assert_eq!(agent.exit_code().await, Some(0));
}
