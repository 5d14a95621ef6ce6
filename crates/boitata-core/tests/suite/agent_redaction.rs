//! Every tool result passes through the run's redactor before the model sees it: a
//! scripted fake model (real HTTP) calls one tool that finds a secret, and the next
//! request it receives, like every event, holds none.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use boitata_core::config::{Config, ProviderKind};
use boitata_core::runtime::Runtime;
use boitata_core::{Emitter, EventPayload};

use boitata_test_support::openai::{
    done, finish_chunk, openai_sse, text_reply, tool_call_chunk, usage_chunk,
};
use boitata_test_support::repo::TempRepo;
use boitata_test_support::FakeModel;
use boitata_tools::workspace::Workspace;
use tokio_util::sync::CancellationToken;

/// The provider key, as in the issue: too short to look like a key, known by value.
const API_KEY: &str = "sk-LEAK1";
/// A value of a variable named in `secrets.env`.
const USER_SECRET: &str = "correct-horse-battery";
/// Somebody else's token: known by its shape only.
fn github_token() -> String {
    format!("ghp_{}", "a1B2c3D4e5F6".repeat(3))
}

/// Every secret the model and the events must never see.
fn secrets() -> Vec<String> {
    vec![API_KEY.to_owned(), USER_SECRET.to_owned(), github_token()]
}

/// A repository holding the secrets in a committed file, an uncommitted change, a
/// commit message, a file name and its remote URL.
fn leaky_repo() -> TempRepo {
    let repo = TempRepo::with_files(&[(
        "notes.txt",
        &format!("key {API_KEY}\npassword {USER_SECRET}\n"),
    )]);
    repo.git(&[
        "remote",
        "add",
        "origin",
        &format!("https://dev:{}@example.invalid/x.git", github_token()),
    ]);
    repo.git(&[
        "commit",
        "--quiet",
        "--allow-empty",
        "-m",
        &format!("rotate {USER_SECRET}"),
    ]);
    std::fs::write(
        repo.path().join("notes.txt"),
        format!(
            "key {API_KEY}\npassword {USER_SECRET}\ntoken {}\n",
            github_token()
        ),
    )
    .unwrap();
    std::fs::write(repo.path().join(format!("{USER_SECRET}.txt")), "x").unwrap();
    repo
}

/// Runs one agent turn in which the model calls `tool` with `arguments`, then ends;
/// returns the tool result the model got back (the `tool` message of its second
/// request) after checking that no request after the first and no event holds a
/// secret.
async fn model_sees(tool: &str, arguments: serde_json::Value) -> String {
    let repo = leaky_repo();
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            tool_call_chunk(0, Some("call_1"), Some(tool), &arguments.to_string()),
            finish_chunk("tool_calls"),
            usage_chunk(10, 5),
            done(),
        ]))
        .await;
    model.push(text_reply("done")).await;

    let mut config = Config::default();
    config.provider.kind = ProviderKind::Openai;
    config.provider.base_url = Some(model.base_url());
    config.provider.api_key = Some(API_KEY.to_owned());
    config.secrets.env = vec!["DB_PASSWORD".to_owned()];
    let env: BTreeMap<String, String> = [
        ("DB_PASSWORD".to_owned(), USER_SECRET.to_owned()),
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
    ]
    .into();
    config.apply_env(&env).unwrap();
    // apply_env reads the key from the environment; this test sets it directly.
    config.provider.api_key = Some(API_KEY.to_owned());
    let provider = boitata_provider::build(&config.provider).unwrap();
    let runtime = Runtime::with_provider(config, provider, &env);

    let events = std::sync::Arc::new(Recorded::default());
    let emitter = Emitter::new("run-1", Some(events.clone()), runtime.redactor());
    let workspace = Workspace::open(repo.path()).unwrap();
    let outcome = runtime
        .agent()
        .run(
            "look around",
            &workspace,
            &emitter,
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.final_message, "done");

    let bodies = model.bodies().await;
    assert_eq!(bodies.len(), 2, "one tool call, one answer");
    let second = bodies[1].to_string();
    let events = events.0.lock().unwrap().join("\n");
    for secret in secrets() {
        assert!(
            !second.contains(&secret),
            "the model got {secret}: {second}"
        );
        assert!(
            !events.contains(&secret),
            "an event holds {secret}: {events}"
        );
    }
    let messages = bodies[1]["messages"].as_array().unwrap();
    let tool_message = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message");
    tool_message["content"].as_str().unwrap().to_owned()
}

/// Events as JSON lines.
#[derive(Default)]
struct Recorded(std::sync::Mutex<Vec<String>>);

impl boitata_core::EventSink for Recorded {
    fn accept(&self, event: &boitata_core::Event) -> Result<(), boitata_core::event::SinkError> {
        if let EventPayload::ToolResult { .. } | EventPayload::ToolCall { .. } = event.payload {
            self.0.lock().unwrap().push(event.to_json_line());
        }
        Ok(())
    }
}

#[tokio::test]
async fn execute_command_output_is_redacted_for_the_model() {
    // The secrets are spelled apart in the command, joined only in its output; and
    // the `.git/config` token scenario of the issue.
    let seen = model_sees(
        "execute_command",
        serde_json::json!({"command": "printf 'OPENAI_API_KEY=%s%s\\n' sk- LEAK1; printf '%s%s\\n' correct-horse- battery; git remote -v; cat .git/config"}),
    )
    .await;
    assert!(seen.contains("OPENAI_API_KEY=[REDACTED]"), "{seen}");
    assert!(
        seen.contains("https://dev:[REDACTED]@example.invalid/x.git"),
        "{seen}"
    );
}

#[tokio::test]
async fn file_read_output_is_redacted_for_the_model() {
    let seen = model_sees("file_read", serde_json::json!({"path": "notes.txt"})).await;
    assert!(seen.contains("key [REDACTED]"), "{seen}");
    assert!(seen.contains("password [REDACTED]"), "{seen}");
    assert!(seen.contains("token [REDACTED]"), "{seen}");
}

#[tokio::test]
async fn search_hits_are_redacted_for_the_model() {
    let seen = model_sees("search", serde_json::json!({"pattern": "password|token"})).await;
    assert!(seen.contains("password [REDACTED]"), "{seen}");
}

#[tokio::test]
async fn git_diff_is_redacted_for_the_model() {
    let seen = model_sees("git_diff", serde_json::json!({})).await;
    assert!(seen.contains("+token [REDACTED]"), "{seen}");
}

#[tokio::test]
async fn git_log_is_redacted_for_the_model() {
    let seen = model_sees("git_log", serde_json::json!({})).await;
    assert!(seen.contains("rotate [REDACTED]"), "{seen}");
}

#[tokio::test]
async fn git_status_and_list_dir_names_are_redacted_for_the_model() {
    let status = model_sees("git_status", serde_json::json!({})).await;
    assert!(status.contains("[REDACTED].txt"), "{status}");
    let listing = model_sees("list_dir", serde_json::json!({"path": "."})).await;
    assert!(listing.contains("[REDACTED].txt"), "{listing}");
}

#[tokio::test]
async fn a_failing_command_is_redacted_for_the_model() {
    let seen = model_sees(
        "execute_command",
        serde_json::json!({"command": "printf '%s%s\\n' correct-horse- battery >&2; exit 3"}),
    )
    .await;
    assert!(seen.contains("[REDACTED]"), "{seen}");
}

#[tokio::test]
async fn file_edit_and_file_write_results_are_redacted_for_the_model() {
    // A failed edit quotes nothing of the file; a good one names the path only. Either
    // way nothing secret reaches the model (model_sees checks every request).
    let failed = model_sees(
        "file_edit",
        serde_json::json!({"path": "notes.txt", "old_string": "absent", "new_string": "x"}),
    )
    .await;
    assert!(failed.starts_with("error:"), "{failed}");
    let written = model_sees(
        "file_write",
        serde_json::json!({"path": "out.txt", "content": "plain"}),
    )
    .await;
    assert!(written.contains("out.txt"), "{written}");
}

#[tokio::test]
async fn git_commit_output_is_redacted_for_the_model() {
    // The untracked file's name holds the secret; committing everything lists it.
    let seen = model_sees(
        "git_commit",
        serde_json::json!({"message": "save work", "all": true}),
    )
    .await;
    assert!(seen.contains("[REDACTED].txt"), "{seen}");
}
