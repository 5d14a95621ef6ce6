//! Connections that fail: an agent that hangs up mid-turn, nothing listening.

use boitata_acp::{run_prompt_at, AcpError, AcpServer, Prompt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::support::{runtime, FakeProvider, FakeTurn, PATIENCE};

#[tokio::test]
async fn an_agent_closing_the_connection_mid_turn_is_a_clear_error() {
    let provider = FakeProvider::new(vec![FakeTurn::Hang]);
    let workspace = tempfile::tempdir().unwrap();
    let server = AcpServer::new(runtime(provider.clone()), workspace.path()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // One connection, served in a task we can kill like a crashed agent process.
    let agent = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let _ = server.serve(stream).await;
    });
    let cwd = std::fs::canonicalize(workspace.path()).unwrap();
    let turn = tokio::spawn(run_prompt_at(
        addr,
        Prompt::new("hang", cwd),
        |_| {},
        CancellationToken::new(),
    ));
    tokio::time::timeout(PATIENCE, provider.hanging.notified())
        .await
        .expect("the model request never started");
    agent.abort();
    let err = tokio::time::timeout(PATIENCE, turn)
        .await
        .expect("run_prompt did not notice the closed connection")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, AcpError::ClosedDuringTurn), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the agent closed the connection during the turn"
    );
}

#[tokio::test]
async fn nothing_listening_is_a_connect_error_naming_the_address() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let err = run_prompt_at(
        addr,
        Prompt::new("hi", "/"),
        |_| {},
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, AcpError::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
}

#[tokio::test]
async fn a_workspace_root_that_does_not_exist_is_refused_up_front() {
    let provider = FakeProvider::new(vec![]);
    let err = AcpServer::new(runtime(provider), std::path::Path::new("/no/such/dir")).unwrap_err();
    assert!(err.to_string().contains("/no/such/dir"), "{err}");
}

#[tokio::test]
async fn wait_ready_returns_once_the_agent_answers_initialize() {
    let agent = super::support::TestAgent::start(vec![], Some("secret-123456")).await;
    boitata_acp::wait_ready(agent.addr, PATIENCE).await.unwrap();
}

#[tokio::test]
async fn wait_ready_is_not_fooled_by_a_port_that_accepts_and_hangs_up() {
    // What a published container port does before anything listens inside.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            drop(stream);
        }
    });
    let err = boitata_acp::wait_ready(addr, std::time::Duration::from_millis(500))
        .await
        .unwrap_err();
    assert!(matches!(err, AcpError::NotReady { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&addr.to_string()), "{message}");
    assert!(message.contains("initialize"), "{message}");
}
