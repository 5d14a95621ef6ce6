//! `session/cancel` while a turn runs: the dispatch loop stays free, the turn ends
//! `cancelled`.

use boitata_acp::{run_prompt_at, Prompt, StopReason};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{FakeTurn, RawClient, Seen, TestAgent, PATIENCE};

#[tokio::test]
async fn cancelling_run_prompt_mid_turn_ends_the_turn_cancelled() {
    let agent = TestAgent::start(
        vec![
            FakeTurn::Reply("working on it", vec![("list_dir", json!({"path": "."}))]),
            FakeTurn::Hang,
        ],
        Some("run-secret-123"),
    )
    .await;
    let seen = Seen::default();
    let cancel = CancellationToken::new();
    let turn = tokio::spawn(run_prompt_at(
        agent.addr,
        Prompt::new("work", agent.root()).secret("run-secret-123"),
        seen.callback(),
        cancel.clone(),
    ));
    // The model is now stuck in its second request.
    tokio::time::timeout(PATIENCE, agent.provider.hanging.notified())
        .await
        .expect("the turn never reached the hanging model request");
    cancel.cancel();
    let outcome = tokio::time::timeout(PATIENCE, turn)
        .await
        .expect("run_prompt did not return after cancel")
        .unwrap()
        .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    assert_eq!(outcome.final_message, "working on it");
    // The events before the cancel all arrived.
    assert_eq!(
        seen.kinds(),
        ["usage", "agent_message", "tool_call", "tool_result"]
    );
}

#[tokio::test]
async fn session_cancel_reaches_the_agent_while_the_turn_holds_the_connection() {
    let agent = TestAgent::start(vec![FakeTurn::Hang], None).await;
    let mut client = RawClient::connect(agent.addr).await;
    client.initialize(None).await;
    let session = client.new_session(&agent.root()).await;
    let session_id = session["result"]["sessionId"].clone();
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 99, "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "hang"}]}}),
        )
        .await;
    tokio::time::timeout(PATIENCE, agent.provider.hanging.notified())
        .await
        .expect("the model request never started");
    // A second prompt in the same session while the first runs is refused at once:
    // proof that the dispatch loop is not blocked by the running turn.
    let (busy, _) = client
        .request(
            "session/prompt",
            json!({"sessionId": session_id, "prompt": [{"type": "text", "text": "again"}]}),
        )
        .await;
    assert_eq!(busy["error"]["code"], -32600, "{busy}");
    assert!(busy["error"]["message"]
        .as_str()
        .unwrap()
        .contains("already running"));

    client
        .notify("session/cancel", json!({"sessionId": session_id}))
        .await;
    let response = client.read().await;
    assert_eq!(response["id"], 99, "{response}");
    assert_eq!(response["result"]["stopReason"], "cancelled");
}

#[tokio::test]
async fn shutting_the_server_down_cancels_running_turns_and_answers_them() {
    let agent = TestAgent::start(vec![FakeTurn::Hang], None).await;
    let turn = tokio::spawn(run_prompt_at(
        agent.addr,
        Prompt::new("hang", agent.root()),
        |_| {},
        CancellationToken::new(),
    ));
    tokio::time::timeout(PATIENCE, agent.provider.hanging.notified())
        .await
        .expect("the model request never started");
    agent.shutdown.cancel();
    let outcome = tokio::time::timeout(PATIENCE, turn)
        .await
        .expect("run_prompt did not return after the server shut down")
        .unwrap()
        .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    tokio::time::timeout(PATIENCE, agent.server)
        .await
        .expect("serve_tcp did not return after shutdown")
        .unwrap();
}

#[tokio::test]
async fn cancel_request_for_the_prompt_also_ends_the_turn_cancelled() {
    let agent = TestAgent::start(vec![FakeTurn::Hang], None).await;
    let mut client = RawClient::connect(agent.addr).await;
    client.initialize(None).await;
    let session = client.new_session(&agent.root()).await;
    let session_id = session["result"]["sessionId"].clone();
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 7, "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "hang"}]}}),
        )
        .await;
    tokio::time::timeout(PATIENCE, agent.provider.hanging.notified())
        .await
        .expect("the model request never started");
    client
        .notify("$/cancel_request", json!({"requestId": 7}))
        .await;
    let response = client.read().await;
    assert_eq!(response["id"], 7, "{response}");
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
}
