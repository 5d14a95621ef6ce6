//! The two leaks, end to end through the binary against a fake model over real
//! HTTP: a command reads the agent's own environment (`/proc/$PPID/environ`, readable
//! as root), and a repository's `.git/config` holds somebody's token. Neither reaches
//! the model, the events on stdout, or the run store.

use boitata_test_support::openai::{done, finish_chunk, openai_sse, text_reply, tool_call_chunk};
use boitata_test_support::repo::TempRepo;
use boitata_test_support::FakeModel;

const API_KEY: &str = "sk-LEAK1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neither_the_key_nor_a_git_config_token_reaches_the_model_the_events_or_the_store() {
    let token = format!("ghp_{}", "Q7w8E9r0T1y2".repeat(3));
    let repo = TempRepo::new();
    repo.git(&[
        "remote",
        "add",
        "origin",
        &format!("https://dev:{token}@example.invalid/x.git"),
    ]);
    let data = tempfile::tempdir().unwrap();
    let model = FakeModel::openai().await;
    let command = "cat /proc/$PPID/environ | tr '\\0' '\\n'; git remote -v; cat .git/config";
    model
        .push(openai_sse(vec![
            tool_call_chunk(
                0,
                Some("call_1"),
                Some("execute_command"),
                &serde_json::json!({ "command": command }).to_string(),
            ),
            finish_chunk("tool_calls"),
            done(),
        ]))
        .await;
    model.push(text_reply("looked")).await;

    let binary = assert_cmd::cargo::cargo_bin("boitata");
    let output = tokio::process::Command::new(binary)
        .args([
            "run",
            "look around",
            "--json",
            "--provider",
            "openai",
            "--workspace",
        ])
        .arg(repo.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", data.path())
        .env("BOITATA_DATA_DIR", data.path())
        .env("BOITATA_BASE_URL", model.base_url())
        .env("OPENAI_API_KEY", API_KEY)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");

    let bodies = model.bodies().await;
    assert_eq!(bodies.len(), 2, "{stderr}");
    let tool_message = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    // The command ran and printed both (masked), so the test saw the leak paths.
    assert!(
        tool_message.contains("https://dev:[REDACTED]@example.invalid/x.git"),
        "{tool_message}"
    );
    if boitata_tools::process::running_as_root() {
        assert!(
            tool_message.contains("OPENAI_API_KEY=[REDACTED]"),
            "{tool_message}"
        );
    }
    let second = bodies[1].to_string();
    let mut store = Vec::new();
    for entry in std::fs::read_dir(data.path()).unwrap().flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("boitata.db")
        {
            store.extend(std::fs::read(entry.path()).unwrap());
        }
    }
    let store = String::from_utf8_lossy(&store);
    for secret in [API_KEY, token.as_str()] {
        assert!(!second.contains(secret), "the model got {secret}: {second}");
        assert!(
            !stdout.contains(secret),
            "an event holds {secret}: {stdout}"
        );
        assert!(!stderr.contains(secret), "stderr holds {secret}: {stderr}");
        assert!(!store.contains(secret), "the store holds {secret}");
    }
}
