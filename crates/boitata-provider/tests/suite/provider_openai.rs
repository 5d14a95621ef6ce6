//! The `openai` provider against a fake Chat Completions server over real HTTP.

use std::time::{Duration, Instant};

use boitata_provider::openai::OpenAi;
use boitata_provider::{
    HttpOptions, Message, ModelRequest, Provider, ProviderError, RetryPolicy, StopReason,
    StreamEvent, ToolCall, ToolSpec, Usage,
};
use boitata_test_support::openai::*;
use boitata_test_support::{
    fast_retry, stalling_sse_server, stream_events, stream_until_error, FakeModel,
};
use serde_json::json;

const KEY: &str = "sk-test-0123456789abcdefghijkl";

fn options(model: &FakeModel) -> HttpOptions {
    HttpOptions::new("gpt-test")
        .base_url(model.base_url())
        .api_key(KEY)
        .retry(fast_retry(2))
}

fn provider(model: &FakeModel) -> OpenAi {
    OpenAi::new(options(model)).unwrap()
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
async fn openai_streams_text_deltas_in_order() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            text_chunk("Hel"),
            text_chunk("lo, "),
            text_chunk("world"),
            finish_chunk("stop"),
            usage_chunk(7, 3),
            done(),
        ]))
        .await;
    let events = stream_events(&provider(&model), &ask("hi")).await.unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("Hel".to_owned()),
            StreamEvent::TextDelta("lo, ".to_owned()),
            StreamEvent::TextDelta("world".to_owned()),
            StreamEvent::Usage(Usage {
                input_tokens: 7,
                output_tokens: 3
            }),
            StreamEvent::Finished(StopReason::EndTurn),
        ]
    );
}

#[tokio::test]
async fn openai_assembles_a_tool_call_whose_name_and_arguments_are_split() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            text_chunk("Writing."),
            tool_call_chunk(0, Some("call_abc"), Some("file_"), ""),
            tool_call_chunk(0, None, Some("write"), "{\"pa"),
            tool_call_chunk(0, None, None, "th\": \"a.txt\", \"con"),
            tool_call_chunk(0, None, None, "tent\": \"h"),
            tool_call_chunk(0, None, None, "i\\n\"}"),
            finish_chunk("tool_calls"),
            usage_chunk(20, 9),
            done(),
        ]))
        .await;
    let mut seen = String::new();
    let response = provider(&model)
        .complete(&ask("write a.txt"), &mut |t: &str| seen.push_str(t))
        .await
        .unwrap();
    assert_eq!(seen, "Writing.");
    assert_eq!(response.text, "Writing.");
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            id: "call_abc".to_owned(),
            name: "file_write".to_owned(),
            arguments: json!({"path": "a.txt", "content": "hi\n"}),
        }]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn openai_joins_interleaved_parallel_tool_calls_by_index() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            tool_call_chunk(0, Some("call_a"), Some("file_read"), ""),
            tool_call_chunk(1, Some("call_b"), Some("list_"), ""),
            tool_call_chunk(1, None, Some("dir"), "{\"path\":"),
            tool_call_chunk(0, None, None, "{\"path\":"),
            tool_call_chunk(1, None, None, " \"src\"}"),
            tool_call_chunk(0, None, None, " \"README.md\"}"),
            finish_chunk("tool_calls"),
            done(),
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
                id: "call_a".to_owned(),
                name: "file_read".to_owned(),
                arguments: json!({"path": "README.md"}),
            },
            ToolCall {
                id: "call_b".to_owned(),
                name: "list_dir".to_owned(),
                arguments: json!({"path": "src"}),
            },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn openai_usage_only_final_chunk_with_empty_choices_is_recorded() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            text_chunk("ok"),
            finish_chunk("stop"),
            usage_chunk(42, 7),
            done(),
        ]))
        .await;
    let response = provider(&model)
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(response.text, "ok");
    assert_eq!(
        response.usage,
        Some(Usage {
            input_tokens: 42,
            output_tokens: 7
        })
    );
    assert_eq!(response.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn openai_maps_length_finish_reason_to_max_tokens() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            text_chunk("cut"),
            finish_chunk("length"),
            done(),
        ]))
        .await;
    let response = provider(&model)
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
    assert_eq!(response.usage, None);
}

#[tokio::test]
async fn openai_retries_429_then_succeeds() {
    let model = FakeModel::openai().await;
    model
        .push(error_response(429, "slow down").insert_header("retry-after", "0"))
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
async fn openai_honours_retry_after_over_its_own_backoff() {
    let model = FakeModel::openai().await;
    model
        .push(error_response(429, "slow down").insert_header("retry-after", "0"))
        .await;
    model.push(text_reply("on time")).await;
    // Without the header the first retry would wait 10 to 20 seconds.
    let slow = RetryPolicy {
        max_retries: 1,
        base_delay: Duration::from_secs(20),
        max_delay: Duration::from_secs(60),
    };
    let openai = OpenAi::new(options(&model).retry(slow)).unwrap();
    let started = Instant::now();
    let response = tokio::time::timeout(
        Duration::from_secs(5),
        openai.complete(&ask("hi"), &mut |_: &str| {}),
    )
    .await
    .expect("retry-after: 0 was not honoured")
    .unwrap();
    assert_eq!(response.text, "on time");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn openai_retries_server_errors_then_succeeds() {
    let model = FakeModel::openai().await;
    model.push(error_response(503, "overloaded")).await;
    model.push(error_response(500, "oops")).await;
    model.push(text_reply("third time")).await;
    let response = provider(&model)
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(response.text, "third time");
    assert_eq!(model.requests().await.len(), 3);
}

#[tokio::test]
async fn openai_gives_up_after_max_retries_on_429() {
    let model = FakeModel::openai().await;
    for _ in 0..4 {
        model
            .push(error_response(429, "slow down").insert_header("retry-after", "0"))
            .await;
    }
    let err = provider(&model)
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::RateLimited { attempts: 3, .. }),
        "{err:?}"
    );
    assert_eq!(model.requests().await.len(), 3);
    assert!(err.to_string().starts_with("openai: rate limited"), "{err}");
}

#[tokio::test]
async fn openai_401_names_the_key_variable_without_retrying_or_leaking_the_key() {
    let model = FakeModel::openai().await;
    model
        .push(error_response(
            401,
            &format!("Incorrect API key provided: {KEY}."),
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
        message.starts_with("openai: authentication failed"),
        "{message}"
    );
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
    assert!(message.contains("Incorrect API key provided"), "{message}");
    assert!(!message.contains(KEY), "the key leaked: {message}");
    assert!(!format!("{err:?}").contains(KEY), "the key leaked: {err:?}");
    assert_eq!(model.requests().await.len(), 1);
}

#[tokio::test]
async fn openai_other_4xx_carries_the_api_message_without_retrying() {
    let model = FakeModel::openai().await;
    model
        .push(error_response(404, "The model `gpt-nope` does not exist"))
        .await;
    let err = provider(&model)
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap_err();
    match &err {
        ProviderError::Http {
            status, attempts, ..
        } => assert_eq!((*status, *attempts), (404, 1)),
        other => panic!("expected Http, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("The model `gpt-nope` does not exist"),
        "{err}"
    );
    assert_eq!(model.requests().await.len(), 1);
}

#[tokio::test]
async fn openai_malformed_data_line_is_a_clear_error() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            text_chunk("partial"),
            raw("{\"choices\": [{\"delta\": {\"content\": \"x\""),
            text_chunk("never seen"),
            done(),
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
        message.starts_with("openai: malformed response stream"),
        "{message}"
    );
    assert!(message.contains("{\"choices\""), "{message}");
}

#[tokio::test]
async fn openai_stream_cut_before_finish_is_an_error() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![text_chunk("half an ans")]))
        .await;
    let err = stream_events(&provider(&model), &ask("hi"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::MalformedStream { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("ended without"), "{err}");
}

#[tokio::test]
async fn openai_error_object_inside_the_stream_is_reported() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![raw(
            "{\"error\": {\"message\": \"model is loading\", \"type\": \"server_error\"}}",
        )]))
        .await;
    let err = stream_events(&provider(&model), &ask("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Api { .. }), "{err:?}");
    assert!(err.to_string().contains("model is loading"), "{err}");
}

#[tokio::test]
async fn openai_sends_the_chat_completions_request_shape() {
    let model = FakeModel::openai().await;
    model.push(text_reply("done")).await;
    let request = ModelRequest {
        system: "You are Boitata.".to_owned(),
        messages: vec![
            Message::User {
                content: "fix it".to_owned(),
            },
            Message::Assistant {
                content: "Reading.".to_owned(),
                tool_calls: vec![ToolCall {
                    id: "call_1".to_owned(),
                    name: "file_read".to_owned(),
                    arguments: json!({"path": "a.rs"}),
                }],
            },
            Message::Tool {
                call_id: "call_1".to_owned(),
                content: "fn main() {}".to_owned(),
                is_error: false,
            },
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_2".to_owned(),
                    name: "file_read".to_owned(),
                    arguments: json!({"path": "../x"}),
                }],
            },
            Message::Tool {
                call_id: "call_2".to_owned(),
                content: "error: path escapes the workspace".to_owned(),
                is_error: true,
            },
        ],
        tools: vec![ToolSpec {
            name: "file_read".to_owned(),
            description: "Reads a file.".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }],
        max_output_tokens: Some(512),
    };
    provider(&model)
        .complete(&request, &mut |_: &str| {})
        .await
        .unwrap();

    let requests = model.requests().await;
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(sent.url.path(), "/v1/chat/completions");
    assert_eq!(
        sent.headers.get("authorization").unwrap(),
        &format!("Bearer {KEY}")
    );
    assert!(sent
        .headers
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let body: serde_json::Value = sent.body_json().unwrap();
    assert_eq!(
        body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "tool_choice": "auto",
            "stream_options": {"include_usage": true},
            "max_tokens": 512,
            "messages": [
                {"role": "system", "content": "You are Boitata."},
                {"role": "user", "content": "fix it"},
                {"role": "assistant", "content": "Reading.", "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "file_read", "arguments": "{\"path\":\"a.rs\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_2", "type": "function",
                     "function": {"name": "file_read", "arguments": "{\"path\":\"../x\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_2", "content": "error: path escapes the workspace"},
            ],
            "tools": [
                {"type": "function", "function": {
                    "name": "file_read",
                    "description": "Reads a file.",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
                }}
            ],
        })
    );
}

#[tokio::test]
async fn openai_needs_a_key_only_at_the_default_url() {
    let err = OpenAi::new(HttpOptions::new("gpt-test")).unwrap_err();
    assert!(
        matches!(err, ProviderError::MissingApiKey { .. }),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "openai: no API key: set OPENAI_API_KEY");

    // A local server (Ollama, vLLM, llama.cpp) needs none, and gets no header.
    let model = FakeModel::openai().await;
    model.push(text_reply("local")).await;
    let local = OpenAi::new(HttpOptions::new("llama3").base_url(model.base_url())).unwrap();
    let response = local.complete(&ask("hi"), &mut |_: &str| {}).await.unwrap();
    assert_eq!(response.text, "local");
    let requests = model.requests().await;
    assert!(requests[0].headers.get("authorization").is_none());
    assert_eq!(
        requests[0].body_json::<serde_json::Value>().unwrap()["model"],
        "llama3"
    );
}

#[tokio::test]
async fn openai_debug_output_never_shows_the_key() {
    let model = FakeModel::openai().await;
    let shown = format!("{:?} {:?}", provider(&model), options(&model));
    assert!(!shown.contains(KEY), "{shown}");
}

#[tokio::test]
async fn openai_times_out_as_configured() {
    let model = FakeModel::openai().await;
    model
        .push(text_reply("too late").set_delay(Duration::from_secs(10)))
        .await;
    let openai = OpenAi::new(
        options(&model)
            .timeout(Duration::from_millis(300))
            .retry(RetryPolicy::never()),
    )
    .unwrap();
    let started = Instant::now();
    let err = openai
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("provider.timeout"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn openai_stream_that_stalls_times_out() {
    let base_url = stalling_sse_server(vec![text_chunk("hel")]).await.unwrap();
    let openai = OpenAi::new(
        HttpOptions::new("gpt-test")
            .base_url(format!("{base_url}/v1"))
            .timeout(Duration::from_millis(300))
            .retry(RetryPolicy::never()),
    )
    .unwrap();
    let started = Instant::now();
    let (events, err) = tokio::time::timeout(
        Duration::from_secs(10),
        stream_until_error(&openai, &ask("hi")),
    )
    .await
    .expect("the stalled stream hung past its timeout");
    assert_eq!(events, vec![StreamEvent::TextDelta("hel".to_owned())]);
    let err = err.expect("a stalled stream must not hang");
    assert!(matches!(err, ProviderError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn openai_unreachable_server_is_retried_then_named() {
    // A port that was just free: the connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let openai = OpenAi::new(
        HttpOptions::new("gpt-test")
            .base_url(&base_url)
            .retry(fast_retry(1)),
    )
    .unwrap();
    let err = openai
        .complete(&ask("hi"), &mut |_: &str| {})
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Connect { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains(&format!("{base_url}/chat/completions")),
        "{message}"
    );
    assert!(message.contains("BOITATA_BASE_URL"), "{message}");
}

#[tokio::test]
async fn openai_joins_a_surrogate_pair_split_across_two_chunks() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            raw(r#"{"choices":[{"index":0,"delta":{"content":"smile \ud83d"},"finish_reason":null}]}"#),
            raw(r#"{"choices":[{"index":0,"delta":{"content":"\ude42 end"},"finish_reason":null}]}"#),
            raw(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
            done(),
        ]))
        .await;
    let response = provider(&model)
        .complete(&ask("hi"), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.text, "smile 🙂 end");
}

#[tokio::test]
async fn openai_lone_surrogates_in_text_reasoning_and_arguments_become_replacement_characters() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            raw(r#"{"choices":[{"index":0,"delta":{"reasoning_content":"think \ud83d"},"finish_reason":null}]}"#),
            raw(r#"{"choices":[{"index":0,"delta":{"content":"a \ud83d"},"finish_reason":null}]}"#),
            raw(r#"{"choices":[{"index":0,"delta":{"content":"b \ude42"},"finish_reason":null}]}"#),
            raw(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"file_write","arguments":"{\"path\": \"x\", \"content\": \"\ud83d"}}]},"finish_reason":null}]}"#),
            raw(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\ude42 \\ud83d\"}"}}]},"finish_reason":null}]}"#),
            raw(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#),
            done(),
        ]))
        .await;
    let response = provider(&model)
        .complete(&ask("hi"), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.text, "a \u{FFFD}b \u{FFFD}");
    assert_eq!(response.tool_calls.len(), 1);
    // The outer halves pair across the two argument deltas; the escaped lone half
    // inside the arguments' JSON becomes U+FFFD.
    assert_eq!(
        response.tool_calls[0].arguments,
        json!({"path": "x", "content": "🙂 \u{FFFD}"})
    );
}
