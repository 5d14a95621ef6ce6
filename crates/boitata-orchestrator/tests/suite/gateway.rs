//! The model gateway over real HTTP on loopback, with Boitata's own providers as the
//! agent and a fake model server as the provider: forwarding with the real key,
//! usage counted from the provider's answer, budgets, revocation.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use boitata_core::budget::{Budget, BudgetMeter};
use boitata_core::{Emitter, Redactor};
use boitata_orchestrator::gateway::{GatewayError, ModelGateway, RunGrant, Upstream, UpstreamApi};
use boitata_provider::anthropic::Anthropic;
use boitata_provider::openai::OpenAi;
use boitata_provider::{HttpOptions, Message, ModelRequest, ProviderError, RetryPolicy};
use boitata_test_support::events::{budget_exceeded, usage, Recorder};
use boitata_test_support::openai::{finish_chunk, openai_sse, text_chunk, usage_chunk};
use boitata_test_support::{anthropic, openai, stream_events, FakeModel};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const REAL_KEY: &str = "sk-real-0123456789abcdef";

fn ask() -> ModelRequest {
    ModelRequest {
        system: "be brief".to_owned(),
        messages: vec![Message::User {
            content: "hi".to_owned(),
        }],
        ..ModelRequest::default()
    }
}

struct Granted {
    gateway: ModelGateway,
    token: String,
    recorder: Arc<Recorder>,
    budget: BudgetMeter,
    base_url: String,
}

async fn granted(model: &FakeModel, api: UpstreamApi, budget: Budget) -> Granted {
    let gateway = ModelGateway::new().unwrap();
    let recorder = Arc::new(Recorder::default());
    let budget = BudgetMeter::new(budget);
    let url = match api {
        UpstreamApi::OpenAi => format!("{}/chat/completions", model.base_url()),
        UpstreamApi::Anthropic => format!("{}/v1/messages", model.base_url()),
    };
    let token = gateway
        .grant(RunGrant {
            run_id: "run-gw".into(),
            upstream: Upstream {
                api,
                url,
                api_key: Some(REAL_KEY.into()),
            },
            budget: budget.clone(),
            emitter: Emitter::new("run-gw", Some(recorder.clone()), Redactor::default()),
        })
        .unwrap();
    let addr = gateway.serve_on(&token, LOOPBACK).await.unwrap();
    Granted {
        gateway,
        token,
        recorder,
        budget,
        base_url: api.base_url(addr),
    }
}

fn agent_options(granted: &Granted) -> HttpOptions {
    HttpOptions::new("gpt-test")
        .base_url(&granted.base_url)
        .api_key(&granted.token)
        .retry(RetryPolicy::never())
}

#[tokio::test]
async fn openai_requests_go_through_with_the_real_key_and_the_gateway_counts_usage() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            text_chunk("hello"),
            finish_chunk("stop"),
            usage_chunk(12, 5),
            openai::done(),
        ]))
        .await;
    let granted = granted(&model, UpstreamApi::OpenAi, Budget::default()).await;
    let agent = OpenAi::new(agent_options(&granted)).unwrap();

    let events = stream_events(&agent, &ask()).await.unwrap();
    assert!(!events.is_empty());

    let requests = model.requests().await;
    assert_eq!(requests.len(), 1);
    let auth = requests[0].headers.get("authorization").unwrap();
    assert_eq!(auth.to_str().unwrap(), format!("Bearer {REAL_KEY}"));
    assert!(
        !String::from_utf8_lossy(&requests[0].body).contains(&granted.token),
        "the token stays at the gateway"
    );
    let body = &model.bodies().await[0];
    assert_eq!(body["stream_options"]["include_usage"], true, "{body}");
    assert_eq!(body["model"], "gpt-test");

    assert_eq!(
        usage(&granted.recorder.events()),
        vec![(12, 5)],
        "one usage event, from the provider's answer"
    );
    assert_eq!(granted.budget.tokens_used(), 17);
    assert_eq!(granted.budget.requests_used(), 1);
}

#[tokio::test]
async fn anthropic_requests_carry_the_real_key_in_x_api_key() {
    let model = FakeModel::anthropic().await;
    model.push(anthropic::text_reply("hello")).await;
    let granted = granted(&model, UpstreamApi::Anthropic, Budget::default()).await;
    let agent = Anthropic::new(agent_options(&granted)).unwrap();

    stream_events(&agent, &ask()).await.unwrap();

    let requests = model.requests().await;
    assert_eq!(requests.len(), 1);
    let key = requests[0].headers.get("x-api-key").unwrap();
    assert_eq!(key.to_str().unwrap(), REAL_KEY);
    assert!(requests[0].headers.get("anthropic-version").is_some());
    // text_reply reports 10 input tokens at the start and 5 output tokens at the end.
    assert_eq!(granted.budget.tokens_used(), 15);
}

#[tokio::test]
async fn a_spent_token_budget_refuses_the_next_request_with_402_and_one_event() {
    let model = FakeModel::openai().await;
    for _ in 0..2 {
        model
            .push(openai_sse(vec![
                text_chunk("more"),
                finish_chunk("stop"),
                usage_chunk(80, 30),
                openai::done(),
            ]))
            .await;
    }
    let budget = Budget {
        tokens: Some(100),
        ..Budget::default()
    };
    let granted = granted(&model, UpstreamApi::OpenAi, budget).await;
    let agent = OpenAi::new(agent_options(&granted)).unwrap();

    stream_events(&agent, &ask()).await.unwrap();
    let refused = stream_events(&agent, &ask()).await.unwrap_err();
    match &refused {
        ProviderError::Http {
            status, message, ..
        } => {
            assert_eq!(*status, 402);
            assert_eq!(message, "budget exceeded: tokens 110 > 100");
        }
        other => panic!("expected HTTP 402, got {other:?}"),
    }
    assert_eq!(
        model.requests().await.len(),
        1,
        "the refused request never left"
    );
    assert_eq!(
        budget_exceeded(&granted.recorder.events()),
        vec!["budget exceeded: tokens 110 > 100".to_owned()]
    );
}

#[tokio::test]
async fn a_revoked_token_is_refused_with_401_on_a_listener_that_stays_up() {
    let model = FakeModel::openai().await;
    model.push(openai::text_reply("hello")).await;
    let granted = granted(&model, UpstreamApi::OpenAi, Budget::default()).await;
    // Another run's lease keeps the listener open after this run's grant goes.
    let other = granted.gateway.listen(LOOPBACK).await.unwrap();
    assert!(granted.base_url.contains(&other.addr().to_string()));

    let agent = OpenAi::new(agent_options(&granted)).unwrap();
    stream_events(&agent, &ask()).await.unwrap();
    granted.gateway.revoke(&granted.token);

    let refused = stream_events(&agent, &ask()).await.unwrap_err();
    assert!(
        matches!(refused, ProviderError::Authentication { status: 401, .. }),
        "{refused:?}"
    );
    let wrong = OpenAi::new(agent_options(&granted).api_key("bgw-guess")).unwrap();
    let refused = stream_events(&wrong, &ask()).await.unwrap_err();
    assert!(
        matches!(refused, ProviderError::Authentication { status: 401, .. }),
        "{refused:?}"
    );
    assert_eq!(model.requests().await.len(), 1);
}

#[tokio::test]
async fn the_gateway_never_listens_on_every_interface() {
    let gateway = ModelGateway::new().unwrap();
    for ip in ["0.0.0.0", "::"] {
        let refused = gateway.listen(ip.parse().unwrap()).await.unwrap_err();
        assert!(
            matches!(refused, GatewayError::Unspecified { .. }),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn the_listener_closes_with_its_last_lease() {
    let gateway = ModelGateway::new().unwrap();
    let first = gateway.listen(LOOPBACK).await.unwrap();
    let second = gateway.listen(LOOPBACK).await.unwrap();
    let addr = first.addr();
    assert_eq!(second.addr(), addr, "one listener per address");
    drop(first);
    assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
    drop(second);
    // The server task stops on its own; give it a moment.
    let mut closed = false;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(closed, "the listener on {addr} is still open");
}

/// A provider that echoes the key it was sent in its error (as OpenAI's "Incorrect API
/// key provided: sk-…" does, and proxies in front of model servers do in full) must
/// not hand the key to the sandbox through the gateway.
#[tokio::test]
async fn a_provider_error_that_echoes_the_key_reaches_the_agent_masked() {
    let model = FakeModel::openai().await;
    model
        .push(
            wiremock::ResponseTemplate::new(401).set_body_json(serde_json::json!({
                "error": {
                    "message": format!("Incorrect API key provided: {REAL_KEY}"),
                    "type": "invalid_request_error",
                }
            })),
        )
        .await;
    let granted = granted(&model, UpstreamApi::OpenAi, Budget::default()).await;
    let answer = reqwest::Client::new()
        .post(format!("{}/chat/completions", granted.base_url))
        .bearer_auth(&granted.token)
        .json(&serde_json::json!({"model": "gpt-test", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 401);
    let body = answer.text().await.unwrap();
    assert!(
        !body.contains(REAL_KEY),
        "the key reached the agent: {body}"
    );
    assert!(body.contains("Incorrect API key provided"), "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error", "{body}");
}

/// `stream_options` is the agent's to send; one that is not an object must not fail
/// the gateway (it used to panic the connection), and usage is still asked for.
#[tokio::test]
async fn a_stream_options_that_is_not_an_object_still_goes_through_with_usage() {
    let model = FakeModel::openai().await;
    model
        .push(openai_sse(vec![
            text_chunk("hello"),
            finish_chunk("stop"),
            usage_chunk(3, 2),
            openai::done(),
        ]))
        .await;
    let granted = granted(&model, UpstreamApi::OpenAi, Budget::default()).await;
    let answer = reqwest::Client::new()
        .post(format!("{}/chat/completions", granted.base_url))
        .bearer_auth(&granted.token)
        .json(&serde_json::json!({
            "model": "gpt-test", "messages": [], "stream": true, "stream_options": 5
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    answer.text().await.unwrap();
    let body = &model.bodies().await[0];
    assert_eq!(body["stream_options"]["include_usage"], true, "{body}");
    assert_eq!(granted.budget.tokens_used(), 5);
}
