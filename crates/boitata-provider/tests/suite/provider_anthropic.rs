//! The `anthropic` provider against a fake Messages API server over real HTTP.

use boitata_provider::anthropic::Anthropic;
use boitata_provider::{
    HttpOptions, Message, ModelRequest, Provider, ProviderError, StopReason, StreamEvent, ToolCall,
    ToolSpec, Usage,
};
use boitata_test_support::anthropic::*;
use boitata_test_support::{fast_retry, stream_events, stream_until_error, FakeModel};
use serde_json::json;

const KEY: &str = "sk-ant-test-0123456789abcdefghij";

fn provider(model: &FakeModel) -> Anthropic {
    Anthropic::new(
        HttpOptions::new("claude-test")
            .base_url(model.base_url())
            .api_key(KEY)
            .retry(fast_retry(2)),
    )
    .unwrap()
}

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        system: "be brief".to_owned(),
        messages: vec![Message::User {
            content: text.to_owned(),
        }],
        ..ModelRequest::default()
    }
}

#[tokio::test]
async fn anthropic_streams_text_with_usage_from_start_and_delta() {
    let model = FakeModel::anthropic().await;
    model
        .push(anthropic_sse(vec![
            message_start(25),
            text_block_start(0),
            ping(),
            text_delta(0, "Hel"),
            text_delta(0, "lo"),
            block_stop(0),
            message_delta("end_turn", 12),
            message_stop(),
        ]))
        .await;
    let events = stream_events(&provider(&model), &ask("hi")).await.unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Hel".to_owned()),
            StreamEvent::TextDelta("lo".to_owned()),
            StreamEvent::Usage(Usage {
                input_tokens: 25,
                output_tokens: 12
            }),
            StreamEvent::Finished(StopReason::EndTurn),
        ]
    );
}

#[tokio::test]
async fn anthropic_joins_tool_input_split_across_deltas() {
    let model = FakeModel::anthropic().await;
    model
        .push(anthropic_sse(vec![
            message_start(30),
            text_block_start(0),
            text_delta(0, "Writing."),
            block_stop(0),
            tool_use_start(1, "toolu_01", "file_write"),
            input_json_delta(1, ""),
            input_json_delta(1, "{\"pa"),
            input_json_delta(1, "th\": \"a.txt\", \"con"),
            input_json_delta(1, "tent\": \"h"),
            input_json_delta(1, "i\\n\"}"),
            block_stop(1),
            message_delta("tool_use", 40),
            message_stop(),
        ]))
        .await;
    let response = provider(&model)
        .complete(&ask("write a.txt"), &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(response.text, "Writing.");
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            id: "toolu_01".to_owned(),
            name: "file_write".to_owned(),
            arguments: json!({"path": "a.txt", "content": "hi\n"}),
        }]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 30,
            output_tokens: 40
        })
    );
}

#[tokio::test]
async fn anthropic_two_tool_uses_in_one_turn_keep_their_own_input() {
    let model = FakeModel::anthropic().await;
    model
        .push(anthropic_sse(vec![
            message_start(30),
            tool_use_start(0, "toolu_a", "file_read"),
            input_json_delta(0, "{\"path\": "),
            input_json_delta(0, "\"README.md\"}"),
            block_stop(0),
            tool_use_start(1, "toolu_b", "list_dir"),
            input_json_delta(1, "{\"path\""),
            input_json_delta(1, ": \"src\"}"),
            block_stop(1),
            message_delta("tool_use", 50),
            message_stop(),
        ]))
        .await;
    let response = provider(&model)
        .complete(&ask("look around"), &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(
        response.tool_calls,
        vec![
            ToolCall {
                id: "toolu_a".to_owned(),
                name: "file_read".to_owned(),
                arguments: json!({"path": "README.md"}),
            },
            ToolCall {
                id: "toolu_b".to_owned(),
                name: "list_dir".to_owned(),
                arguments: json!({"path": "src"}),
            },
        ]
    );
}

#[tokio::test]
async fn anthropic_tool_without_input_gives_an_empty_object() {
    // The API streams `input: {}` then one empty `partial_json` for a tool with no
    // arguments; parsing "" must not fail.
    let model = FakeModel::anthropic().await;
    model
        .push(anthropic_sse(vec![
            message_start(30),
            tool_use_start(0, "toolu_9", "git_status"),
            input_json_delta(0, ""),
            block_stop(0),
            message_delta("tool_use", 20),
            message_stop(),
        ]))
        .await;
    let response = provider(&model)
        .complete(&ask("status?"), &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            id: "toolu_9".to_owned(),
            name: "git_status".to_owned(),
            arguments: json!({}),
        }]
    );
}

#[tokio::test]
async fn anthropic_retries_429_then_succeeds() {
    let model = FakeModel::anthropic().await;
    model
        .push(
            error_response(429, "rate_limit_error", "slow down").insert_header("retry-after", "0"),
        )
        .await;
    model.push(text_reply("recovered")).await;
    let response = provider(&model)
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(response.text, "recovered");
    assert_eq!(model.requests().await.len(), 2);
}

#[tokio::test]
async fn anthropic_retries_529_overloaded() {
    let model = FakeModel::anthropic().await;
    model
        .push(error_response(529, "overloaded_error", "Overloaded"))
        .await;
    model.push(text_reply("fine now")).await;
    let response = provider(&model)
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(response.text, "fine now");
    assert_eq!(model.requests().await.len(), 2);
}

#[tokio::test]
async fn anthropic_401_names_the_key_variable_without_retrying() {
    let model = FakeModel::anthropic().await;
    model
        .push(error_response(
            401,
            "authentication_error",
            "invalid x-api-key",
        ))
        .await;
    model.push(text_reply("never reached")).await;
    let err = provider(&model)
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Authentication { status: 401, .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with("anthropic: authentication failed"),
        "{message}"
    );
    assert!(message.contains("ANTHROPIC_API_KEY"), "{message}");
    assert!(message.contains("invalid x-api-key"), "{message}");
    assert!(!message.contains(KEY), "{message}");
    assert_eq!(model.requests().await.len(), 1);
}

#[tokio::test]
async fn anthropic_malformed_data_line_is_a_clear_error() {
    let model = FakeModel::anthropic().await;
    model
        .push(anthropic_sse(vec![
            message_start(5),
            text_block_start(0),
            text_delta(0, "partial"),
            raw(
                "content_block_delta",
                "{\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": ",
            ),
            message_stop(),
        ]))
        .await;
    let (events, err) = stream_until_error(&provider(&model), &ask("hi")).await;
    assert_eq!(events, vec![StreamEvent::TextDelta("partial".to_owned())]);
    let err = err.expect("the garbage line was accepted");
    assert!(
        matches!(err, ProviderError::MalformedStream { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with("anthropic: malformed response stream"),
        "{message}"
    );
    assert!(message.contains("content_block_delta"), "{message}");
}

#[tokio::test]
async fn anthropic_error_event_ends_the_stream_with_its_message() {
    let model = FakeModel::anthropic().await;
    model
        .push(anthropic_sse(vec![
            message_start(5),
            error_event("overloaded_error", "Overloaded"),
            message_stop(),
        ]))
        .await;
    let err = stream_events(&provider(&model), &ask("hi"))
        .await
        .unwrap_err();
    match &err {
        ProviderError::Api { kind, message, .. } => {
            assert_eq!(
                (kind.as_str(), message.as_str()),
                ("overloaded_error", "Overloaded")
            );
        }
        other => panic!("expected Api, got {other:?}"),
    }
    assert!(err.to_string().starts_with("anthropic: "), "{err}");
}

#[tokio::test]
async fn anthropic_stream_cut_before_message_stop_is_an_error() {
    let model = FakeModel::anthropic().await;
    model
        .push(anthropic_sse(vec![
            message_start(5),
            text_block_start(0),
            text_delta(0, "half"),
        ]))
        .await;
    let err = stream_events(&provider(&model), &ask("hi"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::MalformedStream { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("message_stop"), "{err}");
}

#[tokio::test]
async fn anthropic_sends_the_messages_request_shape() {
    let model = FakeModel::anthropic().await;
    model.push(text_reply("done")).await;
    let call = |id: &str, path: &str| ToolCall {
        id: id.to_owned(),
        name: "file_read".to_owned(),
        arguments: json!({"path": path}),
    };
    let request = ModelRequest {
        system: "You are Boitata.".to_owned(),
        messages: vec![
            Message::User {
                content: "fix it".to_owned(),
            },
            Message::Assistant {
                content: "Reading both.".to_owned(),
                tool_calls: vec![call("toolu_1", "a.rs"), call("toolu_2", "../x")],
            },
            Message::Tool {
                call_id: "toolu_1".to_owned(),
                content: "fn main() {}".to_owned(),
                is_error: false,
            },
            Message::Tool {
                call_id: "toolu_2".to_owned(),
                content: "error: path escapes the workspace".to_owned(),
                is_error: true,
            },
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![call("toolu_3", "b.rs")],
            },
            Message::Tool {
                call_id: "toolu_3".to_owned(),
                content: "// b".to_owned(),
                is_error: false,
            },
        ],
        tools: vec![ToolSpec {
            name: "file_read".to_owned(),
            description: "Reads a file.".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_output_tokens: None,
    };
    provider(&model)
        .complete(&request, &mut |_: &str| {})
        .await
        .unwrap();

    let requests = model.requests().await;
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.url.path(), "/v1/messages");
    assert_eq!(sent.headers.get("x-api-key").unwrap(), KEY);
    assert_eq!(sent.headers.get("anthropic-version").unwrap(), "2023-06-01");
    assert!(sent.headers.get("authorization").is_none());
    let body: serde_json::Value = sent.body_json().unwrap();
    assert_eq!(
        body,
        json!({
            "model": "claude-test",
            "max_tokens": 8192,
            "stream": true,
            "tool_choice": {"type": "auto"},
            "system": "You are Boitata.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "fix it"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "toolu_1", "name": "file_read", "input": {"path": "a.rs"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "file_read", "input": {"path": "../x"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "fn main() {}"},
                    {"type": "tool_result", "tool_use_id": "toolu_2",
                     "content": "error: path escapes the workspace", "is_error": true},
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_3", "name": "file_read", "input": {"path": "b.rs"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_3", "content": "// b"},
                ]},
            ],
            "tools": [
                {"name": "file_read", "description": "Reads a file.",
                 "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
            ],
        })
    );
}

#[tokio::test]
async fn anthropic_base_url_ending_in_v1_is_not_doubled() {
    let model = FakeModel::anthropic().await;
    model.push(text_reply("ok")).await;
    let anthropic = Anthropic::new(
        HttpOptions::new("claude-test")
            .base_url(format!("{}/v1/", model.base_url()))
            .api_key(KEY),
    )
    .unwrap();
    let request = ModelRequest {
        max_output_tokens: Some(100),
        ..ask("hi")
    };
    anthropic
        .complete(&request, &mut |_: &str| {})
        .await
        .unwrap();
    let requests = model.requests().await;
    assert_eq!(requests[0].url.path(), "/v1/messages");
    assert_eq!(
        requests[0].body_json::<serde_json::Value>().unwrap()["max_tokens"],
        100
    );
}

#[tokio::test]
async fn anthropic_needs_a_key_at_the_default_url() {
    let err = Anthropic::new(HttpOptions::new("claude-test")).unwrap_err();
    assert!(
        matches!(err, ProviderError::MissingApiKey { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "anthropic: no API key: set ANTHROPIC_API_KEY"
    );
}

#[tokio::test]
async fn anthropic_joins_surrogate_halves_across_deltas_in_text_thinking_and_tool_input() {
    let model = FakeModel::anthropic().await;
    model
        .push(anthropic_sse(vec![
            message_start(5),
            raw("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#),
            raw("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm \ud83d"}}"#),
            block_stop(0),
            text_block_start(1),
            raw("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"smile \ud83d"}}"#),
            raw("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\ude42 end \ud83d"}}"#),
            block_stop(1),
            tool_use_start(2, "toolu_1", "file_write"),
            raw("content_block_delta", r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"content\": \"\ud83d"}}"#),
            raw("content_block_delta", r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\ude42\"}"}}"#),
            block_stop(2),
            message_delta("tool_use", 9),
            message_stop(),
        ]))
        .await;
    let response = provider(&model)
        .complete(&ask("hi"), &mut |_| {})
        .await
        .unwrap();
    // The block's trailing lone half becomes U+FFFD when the block stops.
    assert_eq!(response.text, "smile 🙂 end \u{FFFD}");
    assert_eq!(response.tool_calls[0].arguments, json!({"content": "🙂"}));
}
