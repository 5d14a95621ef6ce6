//! `agent_sandbox` through the real executor, against the real daemon and the real
//! agent image: an agent per visit, what the node says when the image has no agent,
//! when the agent dies at start or never answers, and cancellation mid-turn.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use boitata_blueprint::{
    Blueprint, Executor, HandlerKind, NodeHandlers, RunReport, RunRequest, RuntimeSource,
};
use boitata_core::config::{Config, ProviderKind};
use boitata_core::{Emitter, Event, EventPayload, Redactor, RunStatus};
use boitata_orchestrator::nodes::agent_sandbox::AgentSandbox;
use boitata_orchestrator::{DockerBackend, SandboxNodes};
use boitata_test_support::docker::{self, docker_ok, Daemon, RunScope};
use boitata_test_support::events::{budget_exceeded, usage, Recorder};
use boitata_test_support::openai::{
    done, finish_chunk, openai_sse, text_reply, tool_call_chunk, usage_chunk,
};
use boitata_test_support::FakeModel;
use tokio_util::sync::CancellationToken;

/// One run of a blueprint with the scripted provider replaying `script`.
struct AgentRun {
    sandboxes: SandboxNodes,
    scope: RunScope,
    recorder: Arc<Recorder>,
    cancel: CancellationToken,
    files: tempfile::TempDir,
    executor: Executor,
}

fn blueprint(yaml: &str) -> Blueprint {
    match boitata_blueprint::parse(yaml, "test.yaml") {
        Ok(v) => v.blueprint,
        Err(d) => panic!("invalid blueprint:\n{}", d.render(100)),
    }
}

fn daemon_with_images(test: &str) -> Option<Daemon> {
    let daemon = docker::daemon(test)?;
    daemon.ensure_base_image();
    daemon.ensure_agent_image();
    Some(daemon)
}

impl AgentRun {
    fn new(daemon: &Daemon, test: &str, ready_timeout: Option<Duration>) -> AgentRun {
        let sandboxes = SandboxNodes::new(Arc::new(DockerBackend::from_env()));
        let mut handlers = NodeHandlers::host();
        sandboxes.register(&mut handlers);
        if let Some(timeout) = ready_timeout {
            handlers.register(
                HandlerKind::AgentSandbox,
                Arc::new(AgentSandbox::new(sandboxes.clone()).with_ready_timeout(timeout)),
            );
        }
        AgentRun {
            sandboxes: sandboxes.clone(),
            scope: daemon.run_scope(test),
            recorder: Arc::new(Recorder::default()),
            cancel: CancellationToken::new(),
            files: tempfile::tempdir().unwrap(),
            executor: Executor::new(handlers).with_hook(sandboxes.hook()),
        }
    }

    fn script(&self, json: &str) -> PathBuf {
        let path = self.files.path().join("script.json");
        std::fs::write(&path, json).unwrap();
        path
    }

    async fn run(&self, yaml: &str, script: PathBuf) -> RunReport {
        let mut config = Config::default();
        config.provider.kind = ProviderKind::Scripted;
        config.provider.script = Some(script);
        self.run_with(yaml, config, BTreeMap::new()).await
    }

    /// A run with the `openai` provider against `model`, with `key` in the run's
    /// environment.
    async fn run_openai(&self, yaml: &str, model: &FakeModel, key: &str) -> RunReport {
        let mut config = Config::default();
        config.provider.kind = ProviderKind::Openai;
        config.provider.model = Some("gpt-test".into());
        config.provider.base_url = Some(model.base_url());
        config.provider.max_retries = 0;
        let env = BTreeMap::from([("OPENAI_API_KEY".to_owned(), key.to_owned())]);
        self.run_with(yaml, config, env).await
    }

    async fn run_with(
        &self,
        yaml: &str,
        config: Config,
        env: BTreeMap<String, String>,
    ) -> RunReport {
        let request = RunRequest {
            task: "the task".into(),
            params: BTreeMap::new(),
            workspace: self.files.path().to_path_buf(),
            runtime: RuntimeSource::Config {
                config,
                env: Arc::new(env),
            },
            emitter: Emitter::new(
                self.scope.run_id(),
                Some(self.recorder.clone()),
                Redactor::default(),
            ),
            cancel: self.cancel.clone(),
        };
        self.executor.run(&blueprint(yaml), request).await.unwrap()
    }

    fn events(&self) -> Vec<Event> {
        self.recorder.events()
    }

    fn node_error(&self, node: &str) -> String {
        self.events()
            .iter()
            .filter(|e| e.node.as_deref() == Some(node))
            .find_map(|e| match &e.payload {
                EventPayload::NodeFinished { error, .. } => error.clone(),
                _ => None,
            })
            .unwrap_or_default()
    }

    fn assert_torn_down(&self) {
        let events = self.events();
        let made = events
            .iter()
            .filter(|e| e.payload.kind() == "sandbox_provisioned")
            .count();
        let destroyed = events
            .iter()
            .filter(|e| e.payload.kind() == "sandbox_destroyed")
            .count();
        assert!(made > 0 && made == destroyed, "{events:#?}");
        assert_eq!(events.last().unwrap().payload.kind(), "run_finished");
        assert_eq!(self.scope.containers(), Vec::<String>::new());
    }
}

const HELLO: &str = r#"{ "turns": [ { "text": "hello from inside the sandbox" } ] }"#;

#[tokio::test]
async fn each_visit_starts_its_own_agent_and_stops_it_afterwards() {
    let Some(daemon) = daemon_with_images("agent_sandbox_two_agents") else {
        return;
    };
    let run = AgentRun::new(&daemon, "agent_sandbox_two_agents", None);
    let report = run
        .run(
            r#"name: two
entry: box
nodes:
  box: { type: provision, image: "boitata-agent-rust:latest", memory: 1g }
  first: { type: agent_sandbox, container: "{box}", prompt: "say hello" }
  second: { type: agent_sandbox, container: "{box}", prompt: "say hello again" }
  left: { type: exec, container: "{box}", command: "for p in /proc/[0-9]*; do cat $p/comm; done | grep -c boitata-agent || true" }
edges:
  - { from: box, to: first }
  - { from: first, when: success, to: second }
  - { from: second, when: success, to: left }
"#,
            run.script(HELLO),
        )
        .await;
    assert_eq!(report.status, RunStatus::Succeeded, "{:#?}", run.events());
    assert_eq!(report.outputs["first"], "hello from inside the sandbox");
    assert_eq!(report.outputs["second"], "hello from inside the sandbox");
    assert_eq!(report.outputs["left"].trim(), "0", "no agent left running");
    let messages: Vec<&str> = run
        .events()
        .iter()
        .filter(|e| e.payload.kind() == "agent_message")
        .map(|e| match e.node.as_deref() {
            Some("first") => "first",
            Some("second") => "second",
            _ => "untagged",
        })
        .collect();
    assert_eq!(messages, ["first", "second"]);
    run.assert_torn_down();
}

#[tokio::test]
async fn an_image_without_the_agent_fails_the_node_saying_which_image_has_it() {
    let Some(daemon) = daemon_with_images("agent_sandbox_no_agent") else {
        return;
    };
    let run = AgentRun::new(&daemon, "agent_sandbox_no_agent", None);
    let report = run
        .run(
            r#"name: noagent
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm", memory: 512m }
  work: { type: agent_sandbox, container: "{box}", prompt: "hi" }
edges:
  - { from: box, to: work }
"#,
            run.script(HELLO),
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = run.node_error("work");
    assert!(
        error.contains("has no boitata-agent on its PATH")
            && error.contains("boitata-agent-rust:latest")
            && error.contains("scripts/build-agent-image.sh"),
        "{error}"
    );
    run.assert_torn_down();
}

#[tokio::test]
async fn an_agent_that_exits_at_start_fails_the_node_with_the_end_of_its_log() {
    let Some(daemon) = daemon_with_images("agent_sandbox_exits") else {
        return;
    };
    let run = AgentRun::new(&daemon, "agent_sandbox_exits", None);
    let started = Instant::now();
    let report = run
        .run(
            r#"name: exits
entry: box
nodes:
  box: { type: provision, image: "boitata-agent-rust:latest", memory: 1g }
  work: { type: agent_sandbox, container: "{box}", prompt: "hi" }
edges:
  - { from: box, to: work }
"#,
            // Not a script: the agent refuses to start.
            run.script(r#"{ "turns": "none at all" }"#),
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = run.node_error("work");
    assert!(
        error.contains("node \"work\": boitata-agent exited in sandbox")
            && error.contains("before it answered on port 7700; its log ends with:")
            && error.contains("boitata-agent: "),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "a dead agent is noticed before the ready timeout"
    );
    run.assert_torn_down();
}

/// An image whose `boitata-agent` writes a line and then never listens.
const MUTE_AGENT_IMAGE: &str = "boitata-test-mute-agent:latest";

fn ensure_mute_agent_image() {
    let dockerfile = format!(
        "FROM {}\nRUN printf '#!/bin/sh\\necho \"mute agent: not listening\" >&2\\nexec sleep 600\\n' > /usr/local/bin/boitata-agent && chmod 755 /usr/local/bin/boitata-agent\n",
        docker::BASE_IMAGE
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Dockerfile"), dockerfile).unwrap();
    docker_ok(&[
        "build",
        "--quiet",
        "-t",
        MUTE_AGENT_IMAGE,
        dir.path().to_str().unwrap(),
    ]);
}

#[tokio::test]
async fn an_agent_that_never_answers_fails_the_node_at_the_ready_timeout_with_its_log() {
    let Some(daemon) = daemon_with_images("agent_sandbox_mute") else {
        return;
    };
    ensure_mute_agent_image();
    let run = AgentRun::new(&daemon, "agent_sandbox_mute", Some(Duration::from_secs(3)));
    let report = run
        .run(
            &format!(
                r#"name: mute
entry: box
nodes:
  box: {{ type: provision, image: "{MUTE_AGENT_IMAGE}", memory: 512m }}
  work: {{ type: agent_sandbox, container: "{{box}}", prompt: "hi" }}
edges:
  - {{ from: box, to: work }}
"#
            ),
            run.script(HELLO),
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = run.node_error("work");
    assert!(
        error.contains("did not answer on port 7700 within 3s")
            && error.contains("mute agent: not listening"),
        "{error}"
    );
    run.assert_torn_down();
}

#[tokio::test]
async fn cancelling_the_run_mid_turn_cancels_the_agents_turn_and_destroys_the_sandbox() {
    let Some(daemon) = daemon_with_images("agent_sandbox_cancel") else {
        return;
    };
    let run = Arc::new(AgentRun::new(&daemon, "agent_sandbox_cancel", None));
    let script = run.script(
        r#"{ "turns": [
            { "tool_calls": [{ "name": "execute_command", "arguments": { "command": "sleep 120" } }] },
            { "text": "never reached" } ] }"#,
    );
    let running = run.clone();
    let handle = tokio::spawn(async move {
        running
            .run(
                r#"name: cancel
entry: box
nodes:
  box: { type: provision, image: "boitata-agent-rust:latest", memory: 1g }
  work: { type: agent_sandbox, container: "{box}", prompt: "wait" }
edges:
  - { from: box, to: work }
"#,
                script,
            )
            .await
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    while !run.events().iter().any(|e| e.payload.kind() == "tool_call") {
        assert!(Instant::now() < deadline, "{:#?}", run.events());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cancelled_at = Instant::now();
    run.cancel.cancel();
    let report = tokio::time::timeout(Duration::from_secs(60), handle)
        .await
        .expect("the run did not end after cancellation")
        .unwrap();
    assert_eq!(report.status, RunStatus::Cancelled);
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(30),
        "the run took {:?} to end",
        cancelled_at.elapsed()
    );
    // The agent ended its turn on `session/cancel`: its command's result came back
    // before the sandbox went.
    let events = run.events();
    let result = events
        .iter()
        .position(|e| e.payload.kind() == "tool_result" && e.node.as_deref() == Some("work"));
    let destroyed = events
        .iter()
        .position(|e| e.payload.kind() == "sandbox_destroyed");
    assert!(
        matches!((result, destroyed), (Some(r), Some(d)) if r < d),
        "{events:#?}"
    );
    run.assert_torn_down();
}

#[tokio::test]
async fn a_sandbox_without_network_fails_the_node_saying_it_needs_one() {
    let Some(daemon) = daemon_with_images("agent_sandbox_no_network") else {
        return;
    };
    let run = AgentRun::new(&daemon, "agent_sandbox_no_network", None);
    let report = run
        .run(
            r#"name: nonet
entry: box
nodes:
  box: { type: provision, image: "boitata-agent-rust:latest", network: none, memory: 512m }
  work: { type: agent_sandbox, container: "{box}", prompt: "hi" }
edges:
  - { from: box, to: work }
"#,
            run.script(HELLO),
        )
        .await;
    assert_eq!(report.status, RunStatus::Failed);
    let error = run.node_error("work");
    assert!(
        error.contains("port 7700 of sandbox")
            && error.contains("cannot be reached")
            && error.contains("on the run network (the default) or bridge"),
        "{error}"
    );
    run.assert_torn_down();
}

/// A model answer calling `execute_command` with `command`, reporting usage.
fn command_call(
    id: &str,
    command: &str,
    input_tokens: u64,
    output_tokens: u64,
) -> wiremock::ResponseTemplate {
    let arguments = serde_json::json!({ "command": command }).to_string();
    openai_sse(vec![
        tool_call_chunk(0, Some(id), Some("execute_command"), &arguments),
        finish_chunk("tool_calls"),
        usage_chunk(input_tokens, output_tokens),
        done(),
    ])
}

const BUDGETED: &str = r#"name: budgeted
entry: box
budget: { tokens: 120 }
nodes:
  box: { type: provision, image: "boitata-agent-rust:latest", memory: 1g }
  work: { type: agent_sandbox, container: "{box}", prompt: "keep going", max_turns: 20 }
edges:
  - { from: box, to: work }
"#;

#[tokio::test]
async fn a_model_that_never_stops_calling_tools_fails_the_run_at_the_token_budget() {
    let Some(daemon) = daemon_with_images("agent_sandbox_budget_spent") else {
        return;
    };
    let run = AgentRun::new(&daemon, "agent_sandbox_budget_spent", None);
    let model = FakeModel::openai().await;
    // Every answer: one more command, 50 tokens.
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(command_call("call_n", "echo again", 40, 10))
        .mount(model.server())
        .await;

    let report = run.run_openai(BUDGETED, &model, "sk-budget-test-key").await;

    assert_eq!(report.status, RunStatus::Failed, "{:#?}", run.events());
    let error = report.error.clone().unwrap_or_default();
    assert!(
        error.contains("budget exceeded: tokens 150 > 120"),
        "the run fails with the budget: {error}"
    );
    let events = run.events();
    assert_eq!(
        budget_exceeded(&events),
        vec!["budget exceeded: tokens 150 > 120".to_owned()],
        "one budget_exceeded event"
    );
    assert_eq!(
        usage(&events),
        vec![(40, 10); 3],
        "usage from the gateway only, one per answered request"
    );
    assert_eq!(
        model.requests().await.len(),
        3,
        "the request after the budget was spent never reached the provider"
    );
    run.assert_torn_down();
}

#[tokio::test]
async fn a_run_under_its_budget_is_unaffected_and_its_gateway_token_dies_with_it() {
    let Some(daemon) = daemon_with_images("agent_sandbox_budget_kept") else {
        return;
    };
    let run = Arc::new(AgentRun::new(&daemon, "agent_sandbox_budget_kept", None));
    let model = FakeModel::openai().await;
    model
        .push(command_call("call_1", "sleep 3; echo done", 40, 10))
        .await;
    model.push(text_reply("all done")).await;
    // A listener of the gateway that outlives the run.
    let gateway = run.sandboxes.gateway().unwrap();
    let loopback = gateway
        .listen(std::net::Ipv4Addr::LOCALHOST.into())
        .await
        .unwrap();

    let task = tokio::spawn({
        let run = run.clone();
        let base_url = model.base_url();
        async move {
            let mut config = Config::default();
            config.provider.kind = ProviderKind::Openai;
            config.provider.model = Some("gpt-test".into());
            config.provider.base_url = Some(base_url);
            let env =
                BTreeMap::from([("OPENAI_API_KEY".to_owned(), "sk-kept-test-key".to_owned())]);
            run.run_with(BUDGETED, config, env).await
        }
    });
    // The agent's token, read from its environment on the host while it works.
    let mut token = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    while token.is_none() && Instant::now() < deadline && !task.is_finished() {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some(sandbox) = run.events().iter().find_map(|e| match &e.payload {
            EventPayload::SandboxProvisioned { sandbox_id, .. } => Some(sandbox_id.clone()),
            _ => None,
        }) else {
            continue;
        };
        let top = docker::docker(&["top", &sandbox, "-eo", "pid,comm"]);
        let top = String::from_utf8_lossy(&top.stdout).into_owned();
        let Some(pid) = top
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("boitata-agent"))
            .and_then(|l| l.split_whitespace().next())
        else {
            continue;
        };
        if let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) {
            token = environ
                .split(|b| *b == 0)
                .filter_map(|kv| std::str::from_utf8(kv).ok())
                .find_map(|kv| kv.strip_prefix("OPENAI_API_KEY="))
                .map(str::to_owned);
        } else {
            break; // not root: the token cannot be read
        }
    }
    let report = task.await.unwrap();
    assert_eq!(report.status, RunStatus::Succeeded, "{:#?}", run.events());
    assert_eq!(report.outputs["work"], "all done");
    let events = run.events();
    assert!(budget_exceeded(&events).is_empty());
    assert_eq!(usage(&events), vec![(40, 10), (10, 5)]);
    run.assert_torn_down();

    let Some(token) = token else {
        assert!(
            !std::env::var("CI").is_ok_and(|v| v == "true"),
            "CI=true: the test must read the agent's environment from the host"
        );
        return;
    };
    assert!(token.starts_with("bgw-"), "{token}");
    let answer = reqwest::Client::new()
        .post(format!("http://{}/v1/chat/completions", loopback.addr()))
        .bearer_auth(&token)
        .json(&serde_json::json!({"model": "gpt-test", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        401,
        "the run's token is revoked when it ends"
    );
    assert_eq!(model.requests().await.len(), 2);
}
