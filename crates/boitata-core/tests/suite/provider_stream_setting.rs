//! `provider.stream` (`true`, `false`, `auto`) against fake servers that refuse to
//! stream with tools (as llama.cpp's Python server does) or answer without streaming.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use boitata_core::config::{Config, StreamMode};
use boitata_core::event::SinkError;
use boitata_core::runtime::Runtime;
use boitata_core::{Emitter, Event, EventPayload, EventSink, Redactor};
use boitata_provider::anthropic::Anthropic;
use boitata_provider::openai::OpenAi;
use boitata_provider::{
    HttpOptions, Message, ModelRequest, Provider, ProviderError, StopReason, StreamEvent, ToolCall,
    ToolSpec,
};
use boitata_test_support::openai::completion;
use boitata_test_support::{fast_retry, stream_events, FakeModel};
use boitata_tools::workspace::Workspace;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{body_partial_json, method};
use wiremock::{Mock, ResponseTemplate};

const REFUSAL: &str = "Automatic streaming tool choice is not supported";

fn options(model: &FakeModel, stream: StreamMode) -> HttpOptions {
    HttpOptions::new("local")
        .base_url(model.base_url())
        .retry(fast_retry(4))
        .stream(stream)
}

fn with_tools(text: &str) -> ModelRequest {
    ModelRequest {
        system: "be brief".to_owned(),
        messages: vec![Message::User {
            content: text.to_owned(),
        }],
        tools: vec![ToolSpec {
            name: "list_dir".to_owned(),
            description: "lists a directory".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_output_tokens: None,
    }
}

/// Streaming requests get llama.cpp's refusal (HTTP 500); the others get `answers`,
/// one each, in order.
async fn refusing_server(answers: Vec<ResponseTemplate>) -> FakeModel {
    let model = FakeModel::openai().await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"stream": true})))
        .respond_with(
            ResponseTemplate::new(500).set_body_json(json!({"error": {"message": REFUSAL}})),
        )
        .mount(model.server())
        .await;
    for answer in answers {
        Mock::given(method("POST"))
            .and(body_partial_json(json!({"stream": false})))
            .respond_with(answer)
            .up_to_n_times(1)
            .mount(model.server())
            .await;
    }
    model
}

fn tool_call_message() -> Value {
    json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{"id": "call_7", "type": "function",
                        "function": {"name": "list_dir", "arguments": "{\"path\": \".\"}"}}],
    })
}

#[tokio::test]
async fn auto_falls_back_to_a_whole_answer_once_and_keeps_using_it() {
    let model = refusing_server(vec![
        completion(tool_call_message(), "tool_calls"),
        completion(json!({"role": "assistant", "content": "done"}), "stop"),
    ])
    .await;
    let provider = OpenAi::new(options(&model, StreamMode::Auto)).unwrap();

    let first = stream_events(&provider, &with_tools("look")).await.unwrap();
    assert!(
        matches!(&first[0], StreamEvent::Note(note) if note.contains(REFUSAL) && note.contains("without streaming")),
        "{first:?}"
    );
    assert_eq!(
        first[1..],
        [
            StreamEvent::ToolCall(ToolCall {
                id: "call_7".to_owned(),
                name: "list_dir".to_owned(),
                arguments: json!({"path": "."}),
            }),
            StreamEvent::Usage(boitata_provider::Usage {
                input_tokens: 12,
                output_tokens: 4
            }),
            StreamEvent::Finished(StopReason::ToolUse),
        ]
    );
    let second = provider
        .complete(&with_tools("again"), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(second.text, "done");
    assert_eq!(second.stop_reason, StopReason::EndTurn);

    let bodies = model.bodies().await;
    let streamed: Vec<bool> = bodies.iter().map(|b| b["stream"] == json!(true)).collect();
    // One refused streaming attempt (not retried), then only whole answers.
    assert_eq!(streamed, [true, false, false]);
    for body in &bodies {
        assert_eq!(body["tool_choice"], "auto", "{body}");
    }
    assert!(bodies[1].get("stream_options").is_none(), "{}", bodies[1]);
}

#[tokio::test]
async fn auto_streams_from_a_server_that_can() {
    let model = FakeModel::openai().await;
    model
        .push(boitata_test_support::openai::text_reply("streamed"))
        .await;
    let provider = OpenAi::new(options(&model, StreamMode::Auto)).unwrap();
    let response = provider
        .complete(&with_tools("hi"), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(response.text, "streamed");
    assert!(response.notes.is_empty(), "{:?}", response.notes);
    assert_eq!(model.bodies().await[0]["stream"], true);
}

#[tokio::test]
async fn stream_false_never_asks_for_a_stream() {
    let model = refusing_server(vec![completion(
        json!({"role": "assistant", "content": "whole"}),
        "stop",
    )])
    .await;
    let provider = OpenAi::new(options(&model, StreamMode::Never)).unwrap();
    let events = stream_events(&provider, &with_tools("hi")).await.unwrap();
    assert_eq!(events[0], StreamEvent::TextDelta("whole".to_owned()));
    assert!(!events.iter().any(|e| matches!(e, StreamEvent::Note(_))));
    let bodies = model.bodies().await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["stream"], false);
}

#[tokio::test]
async fn stream_true_reports_the_refusal_without_retrying() {
    let model = refusing_server(Vec::new()).await;
    let provider = OpenAi::new(options(&model, StreamMode::Always)).unwrap();
    let error = match provider.stream(&with_tools("hi")).await {
        Ok(_) => panic!("a refused request streamed"),
        Err(e) => e,
    };
    assert!(
        matches!(&error, ProviderError::Unsupported { status: 500, message, .. } if message == REFUSAL),
        "{error}"
    );
    assert!(
        error.to_string().contains("provider.stream = false"),
        "{error}"
    );
    assert_eq!(
        model.requests().await.len(),
        1,
        "an unsupported request was retried"
    );
}

#[tokio::test]
async fn anthropic_whole_answer_gives_the_same_events() {
    let model = FakeModel::anthropic().await;
    model
        .push(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant",
            "content": [
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {"path": "src"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 30, "output_tokens": 9},
        })))
        .await;
    let provider = Anthropic::new(
        HttpOptions::new("claude-test")
            .base_url(model.base_url())
            .retry(fast_retry(0))
            .stream(StreamMode::Never),
    )
    .unwrap();
    let events = stream_events(&provider, &with_tools("hi")).await.unwrap();
    assert_eq!(
        events,
        [
            StreamEvent::TextDelta("let me look".to_owned()),
            StreamEvent::ToolCall(ToolCall {
                id: "toolu_1".to_owned(),
                name: "list_dir".to_owned(),
                arguments: json!({"path": "src"}),
            }),
            StreamEvent::Usage(boitata_provider::Usage {
                input_tokens: 30,
                output_tokens: 9
            }),
            StreamEvent::Finished(StopReason::ToolUse),
        ]
    );
    let body = &model.bodies().await[0];
    assert_eq!(body["stream"], false);
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
}

struct Collect(Mutex<Vec<Event>>);

impl EventSink for Collect {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

#[tokio::test]
async fn the_fallback_note_is_one_event_per_run() {
    let model = refusing_server(vec![
        completion(tool_call_message(), "tool_calls"),
        completion(json!({"role": "assistant", "content": "done"}), "stop"),
    ])
    .await;
    let provider = Arc::new(OpenAi::new(options(&model, StreamMode::Auto)).unwrap());
    let runtime = Runtime::with_provider(Config::default(), provider, &BTreeMap::new());
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    let sink = Arc::new(Collect(Mutex::new(Vec::new())));
    let emitter = Emitter::new("r1", Some(sink.clone()), Redactor::default());
    let outcome = runtime
        .agent()
        .run(
            "look",
            &workspace,
            &emitter,
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.final_message, "done");
    let events = sink.0.lock().unwrap().clone();
    let notes: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Note { message } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains(REFUSAL), "{}", notes[0]);
}
