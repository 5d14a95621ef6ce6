//! `boitata_provider::build`: the one dispatch from config to a provider.

use boitata_provider::config::{ProviderConfig, ProviderKind};
use boitata_provider::ProviderError;
use boitata_test_support::openai::text_reply;
use boitata_test_support::FakeModel;
use serde_json::json;

#[tokio::test]
async fn build_makes_the_configured_provider() {
    let model = FakeModel::openai().await;
    model.push(text_reply("built")).await;
    let openai = boitata_provider::build(&ProviderConfig {
        kind: ProviderKind::Openai,
        model: Some("qwen3".to_owned()),
        base_url: Some(model.base_url()),
        ..ProviderConfig::default()
    })
    .unwrap();
    assert_eq!((openai.name(), openai.model()), ("openai", "qwen3"));
    let response = openai
        .complete(
            &boitata_provider::ModelRequest::default(),
            &mut |_: &str| {},
        )
        .await
        .unwrap();
    assert_eq!(response.text, "built");

    let anthropic = boitata_provider::build(&ProviderConfig {
        kind: ProviderKind::Anthropic,
        api_key: Some("sk-ant-test-key-0123456789".to_owned()),
        ..ProviderConfig::default()
    })
    .unwrap();
    assert_eq!(
        (anthropic.name(), anthropic.model()),
        ("anthropic", "claude-sonnet-4-5")
    );

    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.json");
    std::fs::write(&script, json!({"turns": [{"text": "hi"}]}).to_string()).unwrap();
    let scripted = boitata_provider::build(&ProviderConfig {
        kind: ProviderKind::Scripted,
        script: Some(script),
        ..ProviderConfig::default()
    })
    .unwrap();
    assert_eq!(scripted.name(), "scripted");
}

#[test]
fn build_without_a_key_names_the_variable() {
    for (kind, variable) in [
        (ProviderKind::Openai, "OPENAI_API_KEY"),
        (ProviderKind::Anthropic, "ANTHROPIC_API_KEY"),
    ] {
        let err = boitata_provider::build(&ProviderConfig {
            kind,
            ..ProviderConfig::default()
        })
        .err()
        .unwrap();
        assert!(
            matches!(&err, ProviderError::MissingApiKey { variable: v, .. } if v == variable),
            "{err:?}"
        );
        assert!(err.to_string().contains(variable), "{err}");
    }
}
