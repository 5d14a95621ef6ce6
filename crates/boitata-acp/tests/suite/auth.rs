//! The per-run secret: without it (or with a wrong one) no session starts.

use boitata_acp::{run_prompt_at, AcpError, Prompt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{FakeTurn, RawClient, Seen, TestAgent};

const SECRET: &str = "the-run-secret-0123456789";

#[tokio::test]
async fn a_client_without_the_secret_gets_no_session() {
    let agent = TestAgent::start(vec![FakeTurn::Reply("hi", vec![])], Some(SECRET)).await;
    let mut client = RawClient::connect(agent.addr).await;
    let init = client.initialize(None).await;
    assert_eq!(
        init["result"]["authMethods"][0]["id"], "boitata-secret",
        "{init}"
    );
    let session = client.new_session(&agent.root()).await;
    assert_eq!(session["error"]["code"], -32000, "{session}");
    assert!(session["error"]["message"]
        .as_str()
        .unwrap()
        .contains("authentication required"));
    // Nor can it prompt a made-up session.
    let (prompt, _) = client
        .request(
            "session/prompt",
            json!({"sessionId": "guess", "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    assert_eq!(prompt["error"]["code"], -32000, "{prompt}");

    let err = run_prompt_at(
        agent.addr,
        Prompt::new("hi", agent.root()),
        |_| {},
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, AcpError::AuthenticationRefused { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("requires a run secret"), "{err}");
    assert!(agent.provider.requests.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_wrong_secret_is_refused_and_opens_nothing() {
    let agent = TestAgent::start(vec![FakeTurn::Reply("hi", vec![])], Some(SECRET)).await;
    let err = run_prompt_at(
        agent.addr,
        Prompt::new("hi", agent.root()).secret("the-run-secret-0123456788"),
        |_| {},
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, AcpError::AuthenticationRefused { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("does not match"), "{err}");

    let mut client = RawClient::connect(agent.addr).await;
    client.initialize(None).await;
    let auth = client.authenticate("nope").await;
    assert_eq!(auth["error"]["code"], -32000, "{auth}");
    let session = client.new_session(&agent.root()).await;
    assert_eq!(session["error"]["code"], -32000, "{session}");
    // A wrong secret in initialize's _meta fails initialize.
    let mut client = RawClient::connect(agent.addr).await;
    let init = client.initialize(Some("nope")).await;
    assert_eq!(init["error"]["code"], -32000, "{init}");
    assert!(agent.provider.requests.lock().unwrap().is_empty());
}

#[tokio::test]
async fn guessing_is_cut_off_after_three_wrong_secrets() {
    let agent = TestAgent::start(vec![], Some(SECRET)).await;
    let mut client = RawClient::connect(agent.addr).await;
    client.initialize(None).await;
    for _ in 0..3 {
        client.authenticate("wrong").await;
    }
    let auth = client.authenticate(SECRET).await;
    assert_eq!(auth["error"]["code"], -32000, "{auth}");
    assert!(auth["error"]["message"]
        .as_str()
        .unwrap()
        .contains("too many wrong secrets"));
    let session = client.new_session(&agent.root()).await;
    assert_eq!(session["error"]["code"], -32000, "{session}");
}

#[tokio::test]
async fn the_secret_in_initialize_meta_authenticates_the_connection() {
    let agent = TestAgent::start(vec![], Some(SECRET)).await;
    let mut client = RawClient::connect(agent.addr).await;
    let init = client.initialize(Some(SECRET)).await;
    assert!(init["result"].is_object(), "{init}");
    let session = client.new_session(&agent.root()).await;
    assert!(session["result"]["sessionId"].is_string(), "{session}");
}

#[tokio::test]
async fn the_secret_never_appears_in_an_event() {
    // A model that repeats the secret (it could read it from a file, say).
    let agent = TestAgent::start(
        vec![FakeTurn::Reply(
            "the secret is the-run-secret-0123456789",
            vec![],
        )],
        Some(SECRET),
    )
    .await;
    let seen = Seen::default();
    let outcome = run_prompt_at(
        agent.addr,
        Prompt::new("hi", agent.root()).secret(SECRET),
        seen.callback(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.final_message, "the secret is [REDACTED]");
    for event in seen.events() {
        assert!(!event.to_json_line().contains(SECRET), "{event:?}");
    }
}
