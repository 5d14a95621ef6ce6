//! A run through the API: POST, SSE to run_finished, replay with Last-Event-ID, the
//! final status, queueing under the concurrency limit.

use std::time::Duration;

use boitata_core::{EventPayload, OutputStream, RunStatus};
use reqwest::Method;

use super::support::{exec_blueprint, kinds, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streams_to_run_finished_and_replays_after_last_event_id() {
    let server = Setup::default().start().await;
    let id = server.create_run("hello", "say hello").await;

    let first = server.subscribe(&id, None).await;
    assert_eq!(
        first.response_headers.get("x-accel-buffering").unwrap(),
        "no"
    );
    assert!(first
        .response_headers
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let events = first.collect_all().await;

    // Dense ids equal to seq, from 1, ending with run_finished.
    let ids: Vec<u64> = events.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=events.len() as u64).collect::<Vec<_>>());
    assert!(events
        .iter()
        .all(|(sse_id, e)| *sse_id == e.seq && e.run_id == id));
    let kinds = kinds(&events);
    assert_eq!(kinds.first(), Some(&"run_started"));
    assert_eq!(kinds[1], "node_started");
    assert_eq!(kinds[kinds.len() - 2], "node_finished");
    assert_eq!(kinds.last(), Some(&"run_finished"));
    let stdout: String = events
        .iter()
        .filter_map(|(_, e)| match &e.payload {
            EventPayload::ExecOutput {
                stream: OutputStream::Stdout,
                chunk,
            } => Some(chunk.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(stdout, "hello\nworld\n");
    let EventPayload::RunFinished { status, .. } = &events.last().unwrap().1.payload else {
        unreachable!()
    };
    assert_eq!(*status, RunStatus::Succeeded);

    // A second subscriber resuming after event 3 gets exactly 4..n.
    let replay = server.events(&id, Some(3)).await;
    assert_eq!(
        replay.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        (4..=events.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        replay.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>(),
        events[3..]
            .iter()
            .map(|(_, e)| e.clone())
            .collect::<Vec<_>>()
    );

    // GET shows the final status and when it ended.
    let run = server.get_json(&format!("/api/runs/{id}")).await;
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["blueprint"], "hello");
    assert_eq!(run["task"], "say hello");
    assert!(run["finished_at"].is_string());
    assert!(
        run.get("workspace").is_none(),
        "server paths stay private: {run}"
    );

    // The JSON snapshot of the same events.
    let snapshot: Vec<boitata_core::Event> = server
        .request(Method::GET, &format!("/api/runs/{id}/events"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(snapshot.len(), events.len());

    // And the list has it.
    let list = server.get_json("/api/runs").await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id"], id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_that_join_mid_run_miss_nothing_and_see_nothing_twice() {
    // Slow output, so subscribers join while the run is live.
    let command = "for i in $(seq 1 40); do echo line-$i; sleep 0.02; done";
    let server = Setup::default()
        .blueprint("slow.yaml", &exec_blueprint("slow", command))
        .start()
        .await;
    let id = server.create_run("slow", "count").await;

    let mut early = server.subscribe(&id, None).await;
    let head = early.until("exec_output").await;
    let joined_at = head.last().unwrap().0;
    // One resumes from where the early one is, one from the start, while live.
    let resumed = server.subscribe(&id, Some(joined_at)).await;
    let from_start = server.subscribe(&id, None).await;
    let mut early_all = head;
    early_all.extend(early.collect_all().await);
    let resumed = resumed.collect_all().await;
    let from_start = from_start.collect_all().await;

    let n = early_all.len() as u64;
    assert_eq!(early_all.last().unwrap().1.payload.kind(), "run_finished");
    assert_eq!(
        early_all.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>()
    );
    assert_eq!(
        resumed.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (joined_at + 1..=n).collect::<Vec<_>>()
    );
    assert_eq!(
        from_start.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_over_the_limit_wait_queued_then_run() {
    // Each run waits for a gate file, so the first holds the only slot until the test
    // opens the gate.
    let gate_dir = tempfile::tempdir().unwrap();
    let gate = gate_dir.path().join("open");
    let command = format!(
        "while [ ! -e {} ]; do sleep 0.02; done; echo done",
        gate.display()
    );
    let server = Setup::default()
        .max_concurrent_runs(1)
        .blueprint("wait.yaml", &exec_blueprint("wait", &command))
        .start()
        .await;
    let first = server.create_run("wait", "one").await;
    let second = server.create_run("wait", "two").await;
    server.wait_status(&first, RunStatus::Running).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.run_status(&first).await, RunStatus::Running);
    assert_eq!(server.run_status(&second).await, RunStatus::Queued);
    // While queued, its stream is open; it gets everything once the run goes.
    let stream = server.subscribe(&second, None).await;
    std::fs::write(&gate, "").unwrap();
    let events = stream.collect_all().await;
    assert_eq!(kinds(&events).first(), Some(&"run_started"));
    server.wait_status(&first, RunStatus::Succeeded).await;
    assert_eq!(server.run_status(&second).await, RunStatus::Succeeded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_command_fails_the_run_with_its_exit_code() {
    let server = Setup::default()
        .blueprint(
            "fails.yaml",
            &exec_blueprint("fails", "echo oops >&2; exit 3"),
        )
        .start()
        .await;
    let id = server.create_run("fails", "fail").await;
    let events = server.events(&id, None).await;
    let finished = events
        .iter()
        .find_map(|(_, e)| match &e.payload {
            EventPayload::NodeFinished { exit_code, .. } => Some(*exit_code),
            _ => None,
        })
        .unwrap();
    assert_eq!(finished, Some(3));
    assert_eq!(server.run_status(&id).await, RunStatus::Failed);
    let stderr = events.iter().any(|(_, e)| {
        matches!(&e.payload, EventPayload::ExecOutput { stream: OutputStream::Stderr, chunk } if chunk.contains("oops"))
    });
    assert!(stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_comments_flow_while_a_run_is_quiet() {
    let server = Setup::default()
        .blueprint("quiet.yaml", &exec_blueprint("quiet", "sleep 1.6"))
        .start()
        .await;
    let id = server.create_run("quiet", "be quiet").await;
    let mut response = server
        .request(Method::GET, &format!("/api/runs/{id}/events"))
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while let Some(chunk) = tokio::time::timeout_at(deadline, response.chunk())
        .await
        .unwrap()
        .unwrap()
    {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.contains(": keep-alive"), "{text}");
    assert!(text.contains("\"type\":\"run_finished\""), "{text}");
}
