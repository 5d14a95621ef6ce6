//! The host `agent` node, with a fake model provider (no network).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use boitata_blueprint::RuntimeSource;
use boitata_core::config::Config;
use boitata_core::runtime::Runtime;
use boitata_core::{EventPayload, RunStatus};
use boitata_provider::{
    Message, ModelRequest, ModelStream, Provider, ProviderError, StopReason, StreamEvent, ToolCall,
};

use super::support::{path, Harness};

/// Answers each request with `reply(prompt)`, or keeps calling a tool when `loop_tools`.
struct FakeModel {
    prompts: Mutex<Vec<String>>,
    loop_tools: bool,
}

#[async_trait]
impl Provider for FakeModel {
    fn name(&self) -> &str {
        "fake"
    }

    fn model(&self) -> &str {
        "fake-1"
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ProviderError> {
        let prompt = match request.messages.first() {
            Some(Message::User { content }) => content.clone(),
            _ => String::new(),
        };
        self.prompts.lock().unwrap().push(prompt.clone());
        let events = if self.loop_tools {
            vec![
                Ok(StreamEvent::TextDelta("still working".into())),
                Ok(StreamEvent::ToolCall(ToolCall {
                    id: format!("call-{}", request.messages.len()),
                    name: "no_such_tool".into(),
                    arguments: serde_json::json!({}),
                })),
                Ok(StreamEvent::Finished(StopReason::ToolUse)),
            ]
        } else {
            vec![
                Ok(StreamEvent::TextDelta(format!(
                    "fixed: {}",
                    prompt.to_uppercase()
                ))),
                Ok(StreamEvent::Finished(StopReason::EndTurn)),
            ]
        };
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

fn with_model(h: &mut Harness, loop_tools: bool) -> Arc<FakeModel> {
    let model = Arc::new(FakeModel {
        prompts: Mutex::new(Vec::new()),
        loop_tools,
    });
    let runtime = Runtime::with_provider(
        Config::default(),
        model.clone(),
        &BTreeMap::<String, String>::new(),
    );
    h.runtime = RuntimeSource::Ready(runtime);
    model
}

#[tokio::test]
async fn the_agent_gets_its_templated_prompt_and_its_answer_flows_on() {
    let mut h = Harness::new();
    let model = with_model(&mut h, false);
    let report = h
        .run(
            r#"name: fix
entry: test
nodes:
  test: { type: exec, command: "echo 1 failed" }
  fix: { type: agent, prompt: "{task}: tests say {test}" }
  report: { type: exec, command: "echo 'agent said: {fix}'" }
edges:
  - { from: test, to: fix }
  - { from: fix, when: success, to: report }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Succeeded, "{report:?}");
    assert_eq!(path(&report), ["test", "fix", "report"]);
    assert_eq!(
        *model.prompts.lock().unwrap(),
        ["the task: tests say 1 failed"]
    );
    assert_eq!(
        report.outputs["report"],
        "agent said: fixed: THE TASK: TESTS SAY 1 FAILED\n"
    );
    let messages: Vec<_> = h
        .recorder
        .events()
        .into_iter()
        .filter(|e| e.payload.kind() == "agent_message")
        .collect();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].node.as_deref(), Some("fix"));
    let EventPayload::RunStarted {
        provider, model, ..
    } = &h.recorder.events()[0].payload
    else {
        panic!()
    };
    assert_eq!(provider.as_deref(), Some("openai"));
    assert!(model.is_some());
}

#[tokio::test]
async fn an_agent_that_runs_out_of_turns_fails_and_routes() {
    let mut h = Harness::new();
    let model = with_model(&mut h, true);
    let report = h
        .run(
            r#"name: busy
entry: work
nodes:
  work: { type: agent, prompt: "go", max_turns: 2 }
  gave_up: { type: exec, command: "echo gave up" }
edges:
  - { from: work, when: success, to: END }
  - { from: work, when: failure, to: gave_up }
"#,
        )
        .await;
    assert_eq!(path(&report), ["work", "gave_up"]);
    assert_eq!(report.steps[0].outcome, boitata_core::Outcome::Failure);
    assert_eq!(
        model.prompts.lock().unwrap().len(),
        2,
        "max_turns bounds requests"
    );
}

#[tokio::test]
async fn an_agent_out_of_turns_says_why_in_node_finished_and_in_the_run_error() {
    let mut h = Harness::new();
    with_model(&mut h, true);
    let report = h
        .run(
            r#"name: busy
entry: fix
nodes:
  fix: { type: agent, prompt: "go", max_turns: 2 }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    let why = "the agent used all 2 turns without finishing (raise max_turns on the node)";
    let finished: Vec<Option<String>> = h
        .recorder
        .events()
        .into_iter()
        .filter_map(|e| match e.payload {
            EventPayload::NodeFinished { error, .. } => Some(error),
            _ => None,
        })
        .collect();
    assert_eq!(finished, [Some(why.to_owned())]);
    assert_eq!(report.steps[0].error.as_deref(), Some(why));
    assert_eq!(
        report.error.as_deref(),
        Some(format!("the last node, \"fix\", failed: {why}").as_str())
    );
}

#[tokio::test]
async fn node_started_shows_the_prompt_the_agent_gets() {
    let mut h = Harness::new();
    with_model(&mut h, false);
    h.params.insert("what".into(), "the parser".into());
    h.run(
        r#"name: fix
entry: test
params:
  what: {}
nodes:
  test: { type: exec, command: "echo 1 failed" }
  fix: { type: agent, prompt: "{task}: fix {params.what}; tests say {test}" }
edges:
  - { from: test, to: fix }
"#,
    )
    .await;
    let details: Vec<(Option<String>, Option<String>)> = h
        .recorder
        .events()
        .into_iter()
        .filter_map(|e| match e.payload {
            EventPayload::NodeStarted { detail, .. } => Some((e.node, detail)),
            _ => None,
        })
        .collect();
    assert_eq!(
        details,
        [
            (Some("test".into()), Some("echo 1 failed".into())),
            (
                Some("fix".into()),
                Some("the task: fix the parser; tests say 1 failed".into())
            ),
        ]
    );
}

#[tokio::test]
async fn the_test_fix_loop_example_hands_the_agent_what_the_tests_print_on_stderr() {
    // Like `python -m unittest` or a cargo compile error: the failure is on stderr.
    let mut h = Harness::new();
    let model = with_model(&mut h, false);
    h.params.insert(
        "test_command".into(),
        "printf 'FAIL: %s\\n' test_parse >&2; exit 1".into(),
    );
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/blueprints/test_fix_loop.yaml");
    let yaml = std::fs::read_to_string(example).unwrap();
    let report = h.run(&yaml).await;
    assert_eq!(report.status, RunStatus::Failed, "the tests never pass");
    let prompts = model.prompts.lock().unwrap();
    assert!(prompts[0].contains("FAIL: test_parse\n"), "{}", prompts[0]);
}

#[tokio::test]
async fn a_blueprint_without_agent_nodes_needs_no_provider() {
    // The default config names openai with no key: fine while no node needs a model.
    let h = Harness::new();
    let report = h
        .run(
            r#"name: plain
entry: a
nodes:
  a: { type: exec, command: "true" }
"#,
        )
        .await;
    assert_eq!(report.status, RunStatus::Succeeded);
}

#[tokio::test]
async fn an_agent_node_whose_provider_cannot_be_built_fails_the_run_naming_the_node() {
    // No key in the run's environment: building the provider fails at the agent node.
    let h = Harness::new();
    let report = h
        .run(
            r#"name: keyless
entry: first
nodes:
  first: { type: exec, command: "echo ran" }
  work: { type: agent, prompt: "go" }
edges:
  - { from: first, to: work }
"#,
        )
        .await;
    assert_eq!(path(&report), ["first", "work"]);
    assert_eq!(report.status, RunStatus::Failed);
    let error = report.error.unwrap();
    assert!(error.starts_with("node \"work\": "), "{error}");
}
