//! Runs with Docker sandboxes: cancelling through the API destroys the sandbox; after a
//! SIGKILL of the server, the restart reaps it. Skipped without a daemon, except under
//! `CI=true`.

use boitata_core::{Event, EventPayload, RunStatus};
use boitata_test_support::docker::{self, RunScope};
use boitata_test_support::server::ServerProcess;
use reqwest::{Method, StatusCode};

use super::support::{kinds, subscribe, Setup};

const SLEEPER: &str = r#"name: sleeper
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm", memory: 256m, pids: 64, network: none }
  wait: { type: exec, container: "{box}", command: "echo started in the sandbox; sleep 1000" }
edges:
  - { from: box, to: wait }
"#;

fn provisioned(events: &[Event]) -> Option<String> {
    events.iter().find_map(|e| match &e.payload {
        EventPayload::SandboxProvisioned { sandbox_id, .. } => Some(sandbox_id.clone()),
        _ => None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_sandbox_exec_through_the_api_destroys_the_sandbox() {
    let Some(daemon) = docker::daemon("server_cancel_sandbox_exec") else {
        return;
    };
    daemon.ensure_base_image();
    let server = Setup::default()
        .sandboxes()
        .blueprint("sleeper.yaml", SLEEPER)
        .start()
        .await;
    let id = server.create_run("sleeper", "wait in a sandbox").await;
    let scope = RunScope::adopt(id.clone());
    let mut stream = server.subscribe(&id, None).await;
    let head: Vec<Event> = stream
        .until("exec_output")
        .await
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    let sandbox = provisioned(&head).expect("sandbox_provisioned before the exec output");
    assert!(daemon.container_exists(&sandbox));
    assert_eq!(scope.containers().len(), 1);

    let response = server
        .request(Method::POST, &format!("/api/runs/{id}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let rest = stream.collect_all().await;
    assert!(
        kinds(&rest).contains(&"sandbox_destroyed"),
        "{:?}",
        kinds(&rest)
    );
    let EventPayload::RunFinished { status, .. } = &rest.last().unwrap().1.payload else {
        panic!("the stream should end with run_finished")
    };
    assert_eq!(*status, RunStatus::Cancelled);
    assert_eq!(server.run_status(&id).await, RunStatus::Cancelled);
    assert!(
        !daemon.container_exists(&sandbox),
        "the sandbox outlived its cancelled run"
    );
    assert!(scope.containers().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sigkill_the_restarted_server_fails_the_run_and_reaps_its_sandbox() {
    let Some(daemon) = docker::daemon("server_crash_reaps_sandbox") else {
        return;
    };
    daemon.ensure_base_image();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("blueprints")).unwrap();
    std::fs::write(dir.path().join("blueprints/sleeper.yaml"), SLEEPER).unwrap();
    let start = || {
        ServerProcess::builder(env!("CARGO_BIN_EXE_boitata-server"))
            .arg("--blueprints-dir")
            .arg(dir.path().join("blueprints"))
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .start()
    };
    let client = reqwest::Client::new();
    let mut server = start();
    let created: serde_json::Value = client
        .post(format!("{}/api/runs", server.url()))
        .json(&serde_json::json!({"blueprint": "sleeper", "task": "crash"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let scope = RunScope::adopt(id.clone());
    let mut stream = subscribe(&client, server.url(), None, &id, None).await;
    let seen: Vec<Event> = stream
        .until("exec_output")
        .await
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    let sandbox = provisioned(&seen).unwrap();
    server.kill();
    drop(stream);
    assert!(
        daemon.container_exists(&sandbox),
        "SIGKILL leaves the sandbox behind"
    );

    let server = start();
    // The reaper ran before the server listened. (Another reaper on this daemon, a
    // concurrent test's, may be removing it at the same moment: allow for that.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while daemon.container_exists(&sandbox) {
        assert!(
            std::time::Instant::now() < deadline,
            "the restart should reap the sandbox:\n{}",
            server.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        server.log().contains("reaped"),
        "the restart should log the reaping:\n{}",
        server.log()
    );
    assert!(scope.containers().is_empty());
    let stored: Vec<Event> = subscribe(&client, server.url(), None, &id, None)
        .await
        .collect_all()
        .await
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert_eq!(&stored[..seen.len()], &seen[..]);
    let EventPayload::RunFinished { status, error } = &stored.last().unwrap().payload else {
        panic!("run_finished expected last")
    };
    assert_eq!(*status, RunStatus::Failed);
    assert!(error.as_deref().unwrap().starts_with("interrupted"));
}
