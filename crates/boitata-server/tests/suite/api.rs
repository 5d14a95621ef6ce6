//! The API's shape: the OpenAPI document, JSON errors, body limits.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::support::Setup;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_lists_every_route() {
    let server = Setup::default().start().await;
    let doc = server.get_json("/api/openapi.json").await;
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/healthz", "get"),
        ("/api/blueprints", "get"),
        ("/api/runs", "get"),
        ("/api/runs", "post"),
        ("/api/runs/{id}", "get"),
        ("/api/runs/{id}/events", "get"),
        ("/api/runs/{id}/cancel", "post"),
        ("/api/openapi.json", "get"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} missing"
        );
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert!(doc["components"]["schemas"]["RunView"].is_object());
}

async fn post_raw(
    server: &super::support::TestServer,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let response = server
        .request(Method::POST, "/api/runs")
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    (status, response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_with_fitting_statuses() {
    let server = Setup::default().start().await;
    let big = serde_json::to_vec(&serde_json::json!({
        "blueprint": "hello", "task": "x".repeat(100 * 1024)
    }))
    .unwrap();
    let cases: Vec<(&str, Vec<u8>, StatusCode)> = vec![
        ("application/json", big, StatusCode::PAYLOAD_TOO_LARGE),
        (
            "application/json",
            b"{not json".to_vec(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "text/plain",
            br#"{"blueprint":"hello","task":"t"}"#.to_vec(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "application/json",
            br#"{"blueprint":"hello","task":"t","extra":1}"#.to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "application/json",
            br#"{"blueprint":"hello"}"#.to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "application/json",
            br#"{"blueprint":"hello","task":"  "}"#.to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "application/json",
            br#"{"blueprint":"hello","task":"t","params":{"p":[1]}}"#.to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ];
    for (content_type, body, expected) in cases {
        let (status, json) = post_raw(&server, content_type, body).await;
        assert_eq!(status, expected, "{json}");
        assert!(
            json["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{json}"
        );
    }
    assert_eq!(server.get_json("/api/runs").await, serde_json::json!([]));

    for (path, expected) in [
        ("/api/runs/nope", StatusCode::NOT_FOUND),
        ("/api/runs/nope/events", StatusCode::NOT_FOUND),
        ("/nowhere", StatusCode::NOT_FOUND),
        ("/api/runs?limit=abc", StatusCode::BAD_REQUEST),
    ] {
        let response = server.request(Method::GET, path).send().await.unwrap();
        assert_eq!(response.status(), expected, "{path}");
        let json: Value = response.json().await.unwrap();
        assert!(json["error"].is_string(), "{path}: {json}");
    }
    let response = server
        .request(Method::GET, "/api/runs/x/events")
        .header("last-event-id", "three")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_lookups_accept_a_unique_prefix() {
    let server = Setup::default().start().await;
    let id = server.create_run("hello", "t").await;
    let run = server.get_json(&format!("/api/runs/{}", &id[..13])).await;
    assert_eq!(run["id"], id.as_str());
}
