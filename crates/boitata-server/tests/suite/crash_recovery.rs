//! Crash recovery: SIGKILL the server binary during a run, start it again on the same
//! data dir.

use boitata_core::{Event, EventPayload, RunStatus};
use boitata_test_support::server::ServerProcess;
use reqwest::StatusCode;

use super::support::{exec_blueprint, processes_with, subscribe, wait_no_process_with};

fn start(dir: &std::path::Path) -> ServerProcess {
    ServerProcess::builder(env!("CARGO_BIN_EXE_boitata-server"))
        .arg("--blueprints-dir")
        .arg(dir.join("blueprints"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_when_the_server_is_killed_is_failed_interrupted_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let sleep = "sleep 1000.5151";
    std::fs::create_dir_all(dir.path().join("blueprints")).unwrap();
    std::fs::write(
        dir.path().join("blueprints/long.yaml"),
        exec_blueprint("long", &format!("echo one; echo two; {sleep}")),
    )
    .unwrap();
    let client = reqwest::Client::new();

    let mut server = start(dir.path());
    let created: serde_json::Value = client
        .post(format!("{}/api/runs", server.url()))
        .json(&serde_json::json!({"blueprint": "long", "task": "crash"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let mut stream = subscribe(&client, server.url(), None, &id, None).await;
    let mut seen: Vec<Event> = Vec::new();
    loop {
        let (_, event) = stream.next().await.expect("stream ended early");
        let two = matches!(&event.payload, EventPayload::ExecOutput { chunk, .. } if chunk.contains("two"));
        seen.push(event);
        if two {
            break;
        }
    }
    server.kill();
    drop(stream);

    // The host command outlives a SIGKILLed server (nothing in the process can
    // stop it); the test cleans it up so it does not leak.
    for pid in processes_with(sleep) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    wait_no_process_with(sleep).await;

    let server = start(dir.path());
    assert!(
        server.log().contains(&format!("run={id}")) || server.log().contains(&id),
        "the restart should log the interrupted run:\n{}",
        server.log()
    );
    let run: serde_json::Value = client
        .get(format!("{}/api/runs/{id}", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "failed");
    assert!(
        run["error"].as_str().unwrap().starts_with("interrupted"),
        "{run}"
    );

    // Every event seen before the kill is still there, unchanged, and run_finished
    // follows them.
    let response = client
        .get(format!("{}/api/runs/{id}/events", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let stream = subscribe(&client, server.url(), None, &id, None).await;
    let stored: Vec<Event> = stream
        .collect_all()
        .await
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert!(stored.len() > seen.len(), "{stored:?}");
    assert_eq!(&stored[..seen.len()], &seen[..]);
    let last = stored.last().unwrap();
    assert_eq!(last.seq, stored.len() as u64);
    let EventPayload::RunFinished { status, error } = &last.payload else {
        panic!("the last event should be run_finished: {last:?}")
    };
    assert_eq!(*status, RunStatus::Failed);
    assert!(error.as_deref().unwrap().contains("interrupted"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_cancels_live_runs_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let sleep = "sleep 1000.5252";
    std::fs::create_dir_all(dir.path().join("blueprints")).unwrap();
    std::fs::write(
        dir.path().join("blueprints/long.yaml"),
        exec_blueprint("long", &format!("echo up; {sleep}")),
    )
    .unwrap();
    let client = reqwest::Client::new();
    let mut server = start(dir.path());
    let created: serde_json::Value = client
        .post(format!("{}/api/runs", server.url()))
        .json(&serde_json::json!({"blueprint": "long", "task": "stop me"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let mut stream = subscribe(&client, server.url(), None, &id, None).await;
    stream.until("exec_output").await;

    let status = server
        .terminate(std::time::Duration::from_secs(30))
        .expect("the server should exit after SIGTERM");
    assert_eq!(status.code(), Some(0), "{}", server.log());
    // The subscriber saw the run end, cancelled, before the server went away.
    let rest = stream.collect_all().await;
    let EventPayload::RunFinished { status, .. } = &rest.last().unwrap().1.payload else {
        panic!("run_finished expected last: {rest:?}")
    };
    assert_eq!(*status, RunStatus::Cancelled);
    wait_no_process_with(sleep).await;

    // And a restart finds nothing to recover.
    let server = start(dir.path());
    let run: serde_json::Value = client
        .get(format!("{}/api/runs/{id}", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "cancelled");
    assert!(!server.log().contains("interrupted"), "{}", server.log());
}
