//! The auth matrix: no token, a wrong token and the right one, on every route and on
//! SSE; the binary's refusal to listen beyond loopback without a token.

use boitata_core::RunStatus;
use boitata_test_support::server::ServerProcess;
use reqwest::{Method, StatusCode};

use super::support::{exec_blueprint, Setup};

const TOKEN: &str = "test-token-0123456789abcdef";

/// Every API route, with a body where it takes one.
fn routes(run_id: &str) -> Vec<(Method, String, Option<serde_json::Value>)> {
    vec![
        (Method::GET, "/api/blueprints".into(), None),
        (
            Method::POST,
            "/api/runs".into(),
            Some(serde_json::json!({"blueprint": "hello", "task": "t"})),
        ),
        (Method::GET, "/api/runs".into(), None),
        (Method::GET, format!("/api/runs/{run_id}"), None),
        (Method::GET, format!("/api/runs/{run_id}/events"), None),
        (Method::POST, format!("/api/runs/{run_id}/cancel"), None),
        (Method::GET, "/api/openapi.json".into(), None),
        (Method::GET, "/api/no-such-route".into(), None),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_route_needs_the_token_and_a_401_says_nothing_more() {
    let server = Setup::default()
        .token(TOKEN)
        .blueprint("long.yaml", &exec_blueprint("long", "sleep 30"))
        .start()
        .await;
    let run_id = server.create_run("long", "wait").await;

    for (method, path, body) in routes(&run_id) {
        for (label, auth) in [
            ("no token", None),
            ("wrong token", Some("Bearer test-token-0123456789abcdeX")),
            ("token as basic", Some("Basic dGVzdDp0ZXN0")),
            ("empty bearer", Some("Bearer ")),
        ] {
            let mut request = server
                .client
                .request(method.clone(), format!("{}{path}", server.url));
            if let Some(auth) = auth {
                request = request.header("authorization", auth);
            }
            if let Some(body) = &body {
                request = request.json(body);
            }
            let response = request.send().await.unwrap();
            assert_eq!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {label}"
            );
            assert_eq!(response.headers()["www-authenticate"], "Bearer");
            let body: serde_json::Value = response.json().await.unwrap();
            assert_eq!(
                body,
                serde_json::json!({"error": "unauthorized"}),
                "{method} {path}"
            );
        }
    }
    // The refusals changed nothing: the run is still running, no other run exists.
    assert_eq!(server.run_status(&run_id).await, RunStatus::Running);

    // With the right token every route answers (the cancel last).
    for (method, path, body) in routes(&run_id) {
        let mut request = server.request(method.clone(), &path);
        if let Some(body) = &body {
            request = request.json(body);
        }
        if path.ends_with("/events") {
            request = request.header("last-event-id", "0");
        }
        let response = request.send().await.unwrap();
        let expected = match (method.as_str(), path.as_str()) {
            ("POST", "/api/runs") => StatusCode::CREATED,
            ("POST", _) => StatusCode::ACCEPTED,
            (_, "/api/no-such-route") => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        };
        assert_eq!(
            response.status(),
            expected,
            "{method} {path} with the token"
        );
        if path.ends_with("/events") {
            // Do not wait for the stream: dropping it is enough.
            drop(response);
        }
    }
    server.wait_status(&run_id, RunStatus::Cancelled).await;

    // SSE with the token streams to the end.
    let events = server.events(&run_id, None).await;
    assert_eq!(events.last().unwrap().1.payload.kind(), "run_finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_the_ui_files_need_no_token() {
    let server = Setup::default().token(TOKEN).start().await;
    for path in ["/healthz", "/", "/ui/app.js", "/ui/app.css"] {
        let response = server
            .client
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    let health: serde_json::Value = server
        .client
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_configured_the_api_is_open_on_loopback() {
    let server = Setup::default().start().await;
    let response = server
        .client
        .get(format!("{}/api/runs", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

fn server_binary() -> &'static str {
    env!("CARGO_BIN_EXE_boitata-server")
}

#[test]
fn a_non_loopback_bind_without_a_token_refuses_to_start_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let (status, stderr) = ServerProcess::builder(server_binary())
        .arg("--blueprints-dir")
        .arg(dir.path())
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--bind")
        .arg("0.0.0.0:0")
        .run_to_exit();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0 without an API token"),
        "{stderr}"
    );
    assert!(stderr.contains("BOITATA_API_TOKEN"), "{stderr}");
    assert!(stderr.contains("127.0.0.1"), "{stderr}");
}

#[tokio::test]
async fn a_non_loopback_bind_with_a_token_starts_and_never_logs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::builder(server_binary())
        .arg("--blueprints-dir")
        .arg(dir.path())
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--bind")
        .arg("0.0.0.0:0")
        .env("BOITATA_API_TOKEN", TOKEN)
        .env("BOITATA_LOG", "debug")
        .start();
    let port = server.url().rsplit(':').next().unwrap();
    let local = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let health = client.get(format!("{local}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let refused = client
        .get(format!("{local}/api/runs"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let ok = client
        .get(format!("{local}/api/runs"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(
        !server.log().contains(TOKEN),
        "the token was logged:\n{}",
        server.log()
    );
}

#[tokio::test]
async fn tokens_in_query_strings_and_headers_are_not_logged_at_any_level() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = "wrong-token-0f9e8d7c6b5a";
    let server = ServerProcess::builder(server_binary())
        .arg("--blueprints-dir")
        .arg(dir.path())
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("BOITATA_API_TOKEN", TOKEN)
        .env("BOITATA_LOG", "trace")
        .start();
    let client = reqwest::Client::new();
    for (query, bearer) in [
        (format!("token={TOKEN}"), TOKEN),
        (format!("limit=5&access_token={wrong}"), wrong),
        (format!("token={TOKEN}"), wrong),
    ] {
        let response = client
            .get(format!("{}/api/runs?{query}", server.url()))
            .bearer_auth(bearer)
            .header("cookie", format!("session={TOKEN}"))
            .send()
            .await
            .unwrap();
        assert!(response.status() == 200 || response.status() == 401);
    }
    // Let the last lines reach the log.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let log = server.log();
    // The requests were logged (so the test sees the request log at all)…
    assert!(log.contains("/api/runs?token=[REDACTED]"), "{log}");
    assert!(log.contains("access_token=[REDACTED]"), "{log}");
    // …and no token, right or wrong, is in it.
    assert!(!log.contains(TOKEN), "the token was logged:\n{log}");
    assert!(!log.contains(wrong), "a wrong token was logged:\n{log}");
}
