//! The server redacts with the configured secrets everywhere it writes: the runs
//! table, the events, its log, SSE and the API's answers; and refuses a run it cannot
//! serve (no provider key) before recording it.

use boitata_test_support::server::ServerProcess;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use super::support::{subscribe, Setup};

/// A secret that looks like nothing in particular: only `secrets.env` makes it one.
const SECRET: &str = "correct-horse-battery-staple";

/// A blueprint echoing its param and its task.
const LEAKY: &str = "name: leaky\nentry: step\nparams:\n  word: { description: any word }\nnodes:\n  step:\n    type: exec\n    command: \"echo param={params.word}; echo task={task}\"\nedges:\n  - { from: step, to: END }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_secret_in_a_task_and_a_param_is_in_no_table_event_log_line_or_answer() {
    let dir = tempfile::tempdir().unwrap();
    let blueprints = dir.path().join("blueprints");
    std::fs::create_dir_all(&blueprints).unwrap();
    std::fs::write(blueprints.join("leaky.yaml"), LEAKY).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[secrets]\nenv = [\"DB_PASSWORD\"]\n").unwrap();
    let data = dir.path().join("data");
    let server = ServerProcess::builder(env!("CARGO_BIN_EXE_boitata-server"))
        .arg("--blueprints-dir")
        .arg(&blueprints)
        .arg("--data-dir")
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .env("DB_PASSWORD", SECRET)
        .env("BOITATA_LOG", "trace")
        .start();
    let client = reqwest::Client::new();

    let created = client
        .post(format!("{}/api/runs", server.url()))
        .json(&json!({"blueprint": "leaky", "task": format!("deploy with {SECRET}"), "params": {"word": SECRET}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let created = created.text().await.unwrap();
    assert!(!created.contains(SECRET), "{created}");
    let id = serde_json::from_str::<Value>(&created).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // SSE: every message, raw.
    let mut stream = subscribe(&client, server.url(), None, &id, None).await;
    let mut messages = Vec::new();
    while let Some((_, event)) = stream.next().await {
        messages.push(event.to_json_line());
    }
    let messages = messages.join("\n");
    assert!(messages.contains("run_finished"), "{messages}");
    assert!(!messages.contains(SECRET), "{messages}");
    // The command ran with the real value and printed it: its output is masked.
    assert!(messages.contains("param=[REDACTED]"), "{messages}");
    assert!(
        messages.contains("task=deploy with [REDACTED]"),
        "{messages}"
    );

    // The API's answers.
    for path in [format!("/api/runs/{id}"), "/api/runs".to_owned()] {
        let body = client
            .get(format!("{}{path}", server.url()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(!body.contains(SECRET), "{path}: {body}");
        assert!(body.contains("deploy with [REDACTED]"), "{path}: {body}");
    }

    // Every byte of the database (the main file and its write-ahead log).
    let mut db_files = 0;
    for entry in std::fs::read_dir(&data).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("boitata.db") {
            db_files += 1;
            let bytes = std::fs::read(entry.path()).unwrap();
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
                "{name} holds the secret"
            );
        }
    }
    assert!(db_files >= 1);

    // The log, at trace level.
    let log = server.log();
    assert!(log.contains(&id) || log.contains("run started"), "{log}");
    assert!(!log.contains(SECRET), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_server_stores_task_and_params_redacted_too() {
    let server = Setup::default()
        .blueprint("leaky.yaml", LEAKY)
        .env("DB_PASSWORD", SECRET)
        .secret_env("DB_PASSWORD")
        .start()
        .await;
    let response = server
        .request(Method::POST, "/api/runs")
        .json(&json!({"blueprint": "leaky", "task": SECRET, "params": {"word": SECRET}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let run: Value = response.json().await.unwrap();
    assert_eq!(run["task"], "[REDACTED]");
    assert_eq!(run["params"]["word"], "[REDACTED]");
}

/// An `agent` node: it needs the provider, whose key the server does not have.
const AGENT: &str = "name: agentic\nentry: work\nnodes:\n  work:\n    type: agent\n    prompt: \"{task}\"\nedges:\n  - { from: work, to: END }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_the_servers_provider_cannot_serve_is_refused_with_422_and_not_recorded() {
    let server = Setup::default()
        .blueprint("agentic.yaml", AGENT)
        .start()
        .await;
    let response = server
        .request(Method::POST, "/api/runs")
        .json(&json!({"blueprint": "agentic", "task": "fix it"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = response.json().await.unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("OPENAI_API_KEY"), "{error}");
    assert!(error.contains("in the server's environment"), "{error}");
    assert_eq!(server.get_json("/api/runs").await, json!([]));

    // A blueprint without agent nodes still runs.
    let id = server.create_run("hello", "say hello").await;
    assert!(!id.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_past_the_end_gives_an_empty_stream_and_a_malformed_one_400() {
    let server = Setup::default().start().await;
    let id = server.create_run("hello", "say hello").await;
    let all = server.events(&id, None).await;
    let last = all.last().unwrap().0;
    // An ended run: past its end, the stream closes at once, empty.
    assert!(server.events(&id, Some(last + 100)).await.is_empty());
    let response = server
        .request(Method::GET, &format!("/api/runs/{id}/events"))
        .header("last-event-id", "not-a-number")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("Last-Event-ID"),
        "{body}"
    );
}
