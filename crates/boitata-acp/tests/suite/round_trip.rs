//! A whole prompt turn over real TCP: updates, events in `_meta.boitata`, stop reason.

use boitata_acp::{run_prompt_at, Prompt, StopReason};
use boitata_core::{Event, EventPayload};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::support::{FakeTurn, RawClient, Seen, TestAgent};

/// A turn that lists the workspace, calls a tool that does not exist, then ends.
fn two_step_turns() -> Vec<FakeTurn> {
    vec![
        FakeTurn::Reply(
            "Let me look around.",
            vec![
                ("list_dir", json!({"path": "."})),
                ("no_such_tool", json!({})),
            ],
        ),
        FakeTurn::Reply("done", vec![]),
    ]
}

#[tokio::test]
async fn run_prompt_streams_every_event_in_order_and_returns_the_final_message() {
    let agent = TestAgent::start(two_step_turns(), Some("s3cret-for-the-run")).await;
    let seen = Seen::default();
    let prompt = Prompt::new("look around", agent.root()).secret("s3cret-for-the-run");
    let outcome = run_prompt_at(
        agent.addr,
        prompt,
        seen.callback(),
        CancellationToken::new(),
    )
    .await
    .unwrap();

    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.final_message, "done");
    let events = seen.events();
    assert_eq!(outcome.events_seen, events.len() as u64);
    assert_eq!(
        seen.kinds(),
        [
            "usage",
            "agent_message",
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "usage",
            "agent_message"
        ]
    );
    // Dense seq from 1, one run id for the whole turn.
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert!(events.iter().all(|e| e.run_id == events[0].run_id));
    match &events[2].payload {
        EventPayload::ToolCall {
            tool, arguments, ..
        } => {
            assert_eq!(tool, "list_dir");
            assert_eq!(arguments, &json!({"path": "."}));
        }
        other => panic!("expected a tool call, got {other:?}"),
    }
    match &events[5].payload {
        EventPayload::ToolResult {
            tool, ok, output, ..
        } => {
            assert_eq!(tool, "no_such_tool");
            assert!(!ok);
            assert!(output.contains("unknown tool"), "{output}");
        }
        other => panic!("expected a tool result, got {other:?}"),
    }
    // The model saw the tool results: the second request ends with the last one.
    let requests = agent.provider.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["role"], "tool");
}

#[tokio::test]
async fn every_update_is_on_the_wire_before_the_prompt_response() {
    let agent = TestAgent::start(two_step_turns(), None).await;
    let mut client = RawClient::connect(agent.addr).await;
    let init = client.initialize(None).await;
    assert_eq!(init["result"]["protocolVersion"], 1);
    assert_eq!(init["result"]["agentInfo"]["name"], "boitata-agent");
    let session = client.new_session(&agent.root()).await;
    let session_id = session["result"]["sessionId"].as_str().unwrap().to_owned();

    let (response, before) = client
        .request(
            "session/prompt",
            json!({"sessionId": session_id, "prompt": [{"type": "text", "text": "look around"}]}),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        response["result"]["_meta"]["boitata"]["final_message"],
        "done"
    );

    // Everything before the response is a session/update of this session, carrying an
    // event; the events are the whole turn, in seq order.
    assert!(before
        .iter()
        .all(|m| m["method"] == "session/update" && m["params"]["sessionId"] == session_id));
    let updates: Vec<&Value> = before.iter().map(|m| &m["params"]["update"]).collect();
    let events: Vec<Event> = updates
        .iter()
        .map(|u| serde_json::from_value(u["_meta"]["boitata"].clone()).unwrap())
        .collect();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
    let kinds: Vec<&str> = updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "session_info_update",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "session_info_update",
            "agent_message_chunk"
        ]
    );
    assert_eq!(updates[1]["content"]["text"], "Let me look around.");
    let call = updates[2];
    assert_eq!(call["toolCallId"], "call_1");
    assert_eq!(call["kind"], "read");
    assert_eq!(call["status"], "in_progress");
    assert_eq!(call["title"], "list_dir: .");
    assert_eq!(call["rawInput"], json!({"path": "."}));
    let result = updates[3];
    assert_eq!(result["toolCallId"], "call_1");
    let EventPayload::ToolResult { ok, output, .. } = &events[3].payload else {
        panic!("expected a tool result: {:?}", events[3]);
    };
    assert_eq!(
        result["status"],
        if *ok { "completed" } else { "failed" },
        "{result}"
    );
    assert_eq!(result["content"][0]["content"]["text"], output.as_str());
    assert_eq!(updates[5]["status"], "failed");
    assert_eq!(updates[7]["content"]["text"], "done");

    // Nothing of the turn trails its response: the next message on the wire answers
    // the next request.
    let (next, between) = client
        .request(
            "session/new",
            json!({"cwd": agent.root(), "mcpServers": []}),
        )
        .await;
    assert!(
        between.is_empty(),
        "messages after the prompt response: {between:?}"
    );
    assert!(next["result"]["sessionId"].is_string(), "{next}");
}

#[tokio::test]
async fn two_turns_in_one_session_each_get_their_own_run() {
    let agent = TestAgent::start(
        vec![
            FakeTurn::Reply("first", vec![]),
            FakeTurn::Reply("second", vec![]),
        ],
        None,
    )
    .await;
    let mut client = RawClient::connect(agent.addr).await;
    client.initialize(None).await;
    let session = client.new_session(&agent.root()).await;
    let session_id = session["result"]["sessionId"].clone();
    let mut runs = Vec::new();
    for text in ["one", "two"] {
        let (response, before) = client
            .request(
                "session/prompt",
                json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}),
            )
            .await;
        assert_eq!(response["result"]["stopReason"], "end_turn");
        let first: Event =
            serde_json::from_value(before[0]["params"]["update"]["_meta"]["boitata"].clone())
                .unwrap();
        assert_eq!(first.seq, 1);
        runs.push(first.run_id);
    }
    assert_ne!(runs[0], runs[1]);
}

#[tokio::test]
async fn max_turns_in_the_prompt_meta_ends_the_turn_with_max_turn_requests() {
    let agent = TestAgent::start(
        vec![
            FakeTurn::Reply("step", vec![("list_dir", json!({"path": "."}))]),
            FakeTurn::Reply("never reached", vec![]),
        ],
        None,
    )
    .await;
    let seen = Seen::default();
    let prompt = Prompt::new("go", agent.root()).max_turns(1);
    let outcome = run_prompt_at(
        agent.addr,
        prompt,
        seen.callback(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::MaxTurnRequests);
    assert_eq!(outcome.stop_reason.to_string(), "max_turn_requests");
    assert_eq!(outcome.final_message, "step");
    assert_eq!(agent.provider.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_failing_model_is_an_error_response_naming_the_cause() {
    // No turns at all: the first model request fails.
    let agent = TestAgent::start(vec![], None).await;
    let err = run_prompt_at(
        agent.addr,
        Prompt::new("go", agent.root()),
        |_| {},
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(
            err,
            boitata_acp::AcpError::Refused {
                method: "session/prompt",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(message.contains("no more turns"), "{message}");
}
