//! Cancelling through the API: a running host `exec`, a queued run, a finished one.

use boitata_core::{EventPayload, RunStatus};
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::support::{exec_blueprint, kinds, processes_with, wait_no_process_with, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_running_exec_ends_the_run_cancelled_and_kills_the_command() {
    // A distinctive duration, to find the process by its command line.
    let sleep = "sleep 1000.4242";
    let server = Setup::default()
        .blueprint(
            "long.yaml",
            &exec_blueprint("long", &format!("echo started; {sleep}")),
        )
        .start()
        .await;
    let id = server.create_run("long", "wait forever").await;
    let mut stream = server.subscribe(&id, None).await;
    stream.until("exec_output").await;
    assert_eq!(server.run_status(&id).await, RunStatus::Running);
    assert!(
        !processes_with(sleep).is_empty(),
        "the command should be running"
    );

    let response = server
        .request(Method::POST, &format!("/api/runs/{id}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["id"], id.as_str());

    let rest = stream.collect_all().await;
    assert_eq!(kinds(&rest).last(), Some(&"run_finished"));
    let EventPayload::RunFinished { status, .. } = &rest.last().unwrap().1.payload else {
        unreachable!()
    };
    assert_eq!(*status, RunStatus::Cancelled);
    assert_eq!(server.run_status(&id).await, RunStatus::Cancelled);
    wait_no_process_with(sleep).await;

    // Cancelling again: the run has ended.
    let again = server
        .request(Method::POST, &format!("/api/runs/{id}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT);
    let body: Value = again.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("already ended (cancelled)"),
        "{body}"
    );

    let unknown = server
        .request(Method::POST, "/api/runs/no-such-run/cancel")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_while_queued_never_starts() {
    let server = Setup::default()
        .max_concurrent_runs(1)
        .blueprint("long.yaml", &exec_blueprint("long", "sleep 1000.4343"))
        .start()
        .await;
    let running = server.create_run("long", "first").await;
    let queued = server.create_run("long", "second").await;
    server.wait_status(&running, RunStatus::Running).await;
    assert_eq!(server.run_status(&queued).await, RunStatus::Queued);

    let response = server
        .request(Method::POST, &format!("/api/runs/{queued}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let events = server.events(&queued, None).await;
    assert_eq!(kinds(&events), ["run_finished"]);
    let run = server.get_json(&format!("/api/runs/{queued}")).await;
    assert_eq!(run["status"], "cancelled");
    assert_eq!(run["error"], "cancelled while queued");

    server
        .request(Method::POST, &format!("/api/runs/{running}/cancel"))
        .send()
        .await
        .unwrap();
    server.wait_status(&running, RunStatus::Cancelled).await;
    wait_no_process_with("sleep 1000.4343").await;
}
