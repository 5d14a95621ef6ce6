//! The `scripted` provider: deterministic replay of a script file.

use std::path::Path;

use boitata_provider::config::{ProviderConfig, ProviderKind};
use boitata_provider::scripted::Scripted;
use boitata_provider::{
    Message, ModelRequest, Provider, ProviderError, StopReason, StreamEvent, ToolCall, Usage,
};
use boitata_test_support::stream_events;
use serde_json::json;

const LONG_TEXT: &str = "I will create the greeting file first and then look at the tree.";

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        system: "sys".to_owned(),
        messages: vec![Message::User {
            content: text.to_owned(),
        }],
        ..ModelRequest::default()
    }
}

fn write_script(dir: &Path, script: &serde_json::Value) -> std::path::PathBuf {
    let path = dir.join("session.json");
    std::fs::write(&path, serde_json::to_string_pretty(script).unwrap()).unwrap();
    path
}

fn three_turns(dir: &Path) -> std::path::PathBuf {
    write_script(
        dir,
        &json!({"description": "for people only", "turns": [
            {"text": LONG_TEXT, "tool_calls": [
                {"name": "file_write", "arguments": {"path": "hello.txt", "content": "hi\n"}},
                {"name": "list_dir", "arguments": {"path": "."}},
            ]},
            {"tool_calls": [{"name": "git_status"}]},
            {"text": "Done."},
        ]}),
    )
}

fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn scripted_replays_turns_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let scripted = Scripted::load(&three_turns(dir.path())).unwrap();
    assert_eq!(
        (scripted.name(), scripted.model()),
        ("scripted", "scripted")
    );
    assert_eq!(scripted.turn_count(), 3);

    let request = ask("make a greeting");
    let first = stream_events(&scripted, &request).await.unwrap();
    let deltas = first
        .iter()
        .take_while(|e| matches!(e, StreamEvent::TextDelta(_)))
        .count();
    assert!(deltas >= 2, "text should stream in pieces: {first:?}");
    assert_eq!(text_of(&first), LONG_TEXT);
    let expected_output_bytes = LONG_TEXT.len()
        + "file_write".len()
        + json!({"path": "hello.txt", "content": "hi\n"})
            .to_string()
            .len()
        + "list_dir".len()
        + json!({"path": "."}).to_string().len();
    assert_eq!(
        first[deltas..],
        [
            StreamEvent::ToolCall(ToolCall {
                id: "call_1".to_owned(),
                name: "file_write".to_owned(),
                arguments: json!({"path": "hello.txt", "content": "hi\n"}),
            }),
            StreamEvent::ToolCall(ToolCall {
                id: "call_2".to_owned(),
                name: "list_dir".to_owned(),
                arguments: json!({"path": "."}),
            }),
            StreamEvent::Usage(Usage {
                // "sys" + "make a greeting" = 18 bytes
                input_tokens: 5,
                output_tokens: expected_output_bytes.div_ceil(4) as u64,
            }),
            StreamEvent::Finished(StopReason::ToolUse),
        ]
    );

    let second = scripted
        .complete(&request, &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(second.text, "");
    assert_eq!(
        second.tool_calls,
        vec![ToolCall {
            id: "call_3".to_owned(),
            name: "git_status".to_owned(),
            arguments: json!({}),
        }]
    );

    let third = scripted
        .complete(&request, &mut |_: &str| {})
        .await
        .unwrap();
    assert_eq!(third.text, "Done.");
    assert!(third.tool_calls.is_empty());
    assert_eq!(third.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn scripted_exhaustion_says_how_many_turns_the_script_has() {
    let dir = tempfile::tempdir().unwrap();
    let path = three_turns(dir.path());
    let scripted = Scripted::load(&path).unwrap();
    for _ in 0..3 {
        scripted
            .complete(&ask("go"), &mut |_: &str| {})
            .await
            .unwrap();
    }
    let err = scripted
        .complete(&ask("more?"), &mut |_: &str| {})
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Script(_)), "{err:?}");
    let message = err.to_string();
    assert!(message.starts_with("scripted provider: "), "{message}");
    assert!(message.contains("has 3 turns"), "{message}");
    assert!(message.contains("request 4"), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
}

#[tokio::test]
async fn scripted_missing_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.json");
    let err = Scripted::load(&path).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, ProviderError::Script(_)), "{err:?}");
    assert!(
        message.contains(&format!("cannot read script {}", path.display())),
        "{message}"
    );
}

#[tokio::test]
async fn scripted_invalid_file_names_the_path_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.json");
    std::fs::write(
        &path,
        "{\n  \"turns\": [\n    {\"text\": \"hi\",}\n  ]\n}\n",
    )
    .unwrap();
    let message = Scripted::load(&path).unwrap_err().to_string();
    assert!(
        message.contains(&format!("invalid script {}", path.display())),
        "{message}"
    );
    assert!(message.contains("line 3 column"), "{message}");
}

#[tokio::test]
async fn scripted_unknown_fields_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_script(dir.path(), &json!({"turns": [{"txt": "hi"}]}));
    let message = Scripted::load(&path).unwrap_err().to_string();
    assert!(message.contains("unknown field `txt`"), "{message}");
}

#[tokio::test]
async fn scripted_from_config_needs_a_script() {
    let config = ProviderConfig {
        kind: ProviderKind::Scripted,
        ..ProviderConfig::default()
    };
    let message = Scripted::from_config(&config).unwrap_err().to_string();
    assert!(message.contains("BOITATA_SCRIPT"), "{message}");
    assert!(message.contains("provider.script"), "{message}");
}

#[test]
fn scripted_example_sessions_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripts");
    let mut loaded = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let scripted = Scripted::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(scripted.turn_count() > 0, "{} has no turns", path.display());
            loaded += 1;
        }
    }
    assert!(loaded > 0, "no example scripts in {}", dir.display());
}
