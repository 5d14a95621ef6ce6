//! The DNS-rebinding and cross-site guard: `Host` and `Origin`, with and without a
//! token.

use reqwest::{Method, StatusCode};

use super::support::{exec_blueprint, Setup, TestServer};

async fn status_with(
    server: &TestServer,
    method: Method,
    path: &str,
    host: &str,
    origin: Option<&str>,
) -> StatusCode {
    let mut request = server.request(method, path).header("host", host);
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.unwrap().status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebinding_host_is_refused_on_every_route_with_or_without_a_token() {
    for server in [
        Setup::default().start().await,
        Setup::default()
            .token("rebinding-test-token-123")
            .start()
            .await,
    ] {
        let port = server.url.rsplit(':').next().unwrap().to_owned();
        for path in [
            "/healthz",
            "/",
            "/api/runs",
            "/api/blueprints",
            "/ui/app.js",
        ] {
            let status = status_with(
                &server,
                Method::GET,
                path,
                &format!("evil.example:{port}"),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
            let status =
                status_with(&server, Method::GET, path, "localhost.evil.example", None).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        }
        let response = server
            .request(Method::GET, "/api/runs")
            .header("host", "evil.example")
            .send()
            .await
            .unwrap();
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("DNS-rebinding guard"),
            "{body}"
        );
        for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
            assert_eq!(
                status_with(&server, Method::GET, "/api/runs", &host, None).await,
                StatusCode::OK
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_requests_are_refused_and_allowed_hosts_are_served() {
    let server = Setup::default()
        .allowed_host("boitata.internal")
        .blueprint("long.yaml", &exec_blueprint("long", "sleep 30"))
        .start()
        .await;
    let id = server.create_run("long", "wait").await;
    let host = server.url.trim_start_matches("http://").to_owned();
    let cancel = format!("/api/runs/{id}/cancel");

    // A page elsewhere posting to the local API (no token needed here) is refused.
    for origin in [
        "http://evil.example",
        "http://1.2.3.4",
        "null",
        "http://127.0.0.1:1",
    ] {
        let status = status_with(&server, Method::POST, &cancel, &host, Some(origin)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "origin {origin}");
    }
    assert_eq!(
        server.run_status(&id).await,
        boitata_core::RunStatus::Running
    );

    // The allowed name, as Host and as Origin.
    let status = status_with(&server, Method::GET, "/api/runs", "boitata.internal", None).await;
    assert_eq!(status, StatusCode::OK);
    let status = status_with(
        &server,
        Method::GET,
        "/api/runs",
        &host,
        Some("https://boitata.internal"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // The UI's own origin.
    let status = status_with(&server, Method::POST, &cancel, &host, Some(&server.url)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
}
