//! No secret leaves where it belongs: an `agent_sandbox` run with the `openai`
//! provider pointed at a fake model server on the host (which the agent, inside the
//! sandbox, reaches through `host.docker.internal`), an API key, and the run's own
//! secret. Neither appears in any stored event, in `docker inspect` of the sandbox while
//! the agent runs (env, labels), in the image, or to the agent's own commands.

use std::time::Duration;

use boitata_core::{Event, EventPayload, RunStatus};
use boitata_test_support::docker::{docker, docker_ok, AGENT_IMAGE};
use boitata_test_support::openai::{done, finish_chunk, openai_sse, text_reply, tool_call_chunk};
use boitata_test_support::FakeModel;

use super::sandbox_support::{agent_daemon, assert_torn_down, try_read_until, Home};

const BLUEPRINT: &str = r#"name: secrets
entry: box
nodes:
  box: { type: provision, image: "boitata-agent-rust:latest", memory: 1g }
  work: { type: agent_sandbox, container: "{box}", prompt: "look around", max_turns: 4, timeout: 5m }
edges:
  - { from: box, to: work }
"#;

/// What the model has the agent run: count secret-looking variables in its own
/// environment, try to read the agent's launch environment from /proc, then wait a
/// little so the test can look at the sandbox while the turn is under way.
const PROBE: &str = r#"echo "secret variables seen: $(env | grep -c -e OPENAI_API_KEY -e BOITATA_AGENT_SECRET)"; for p in /proc/[0-9]*; do if [ "$(cat $p/comm 2>/dev/null)" = boitata-agent ]; then tr '\0' '\n' < $p/environ; fi; done; sleep 4"#;

fn random_key() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("sk-test-{nanos:x}{:x}", std::process::id())
}

/// The run secret, read by the test from the host's /proc (the host is root over its
/// containers; the sandbox's own users are not), or `None` when this process may not.
fn agent_secret_from_the_host(sandbox: &str) -> Option<String> {
    let top = docker_ok(&["top", sandbox, "-eo", "pid,comm"]);
    let pid = top
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("boitata-agent"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no boitata-agent in the sandbox: {top}"))
        .to_owned();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix("BOITATA_AGENT_SECRET="))
        .map(str::to_owned)
}

#[allow(clippy::print_stderr)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_the_events_the_sandbox_or_the_image() {
    let Some(_daemon) = agent_daemon("containerized_secrets") else {
        return;
    };
    let model = FakeModel::openai_for_containers().await;
    let arguments = serde_json::json!({ "command": PROBE }).to_string();
    model
        .push(openai_sse(vec![
            tool_call_chunk(0, Some("call_1"), Some("execute_command"), &arguments),
            finish_chunk("tool_calls"),
            done(),
        ]))
        .await;
    model
        .push(text_reply("I looked around; nothing to do."))
        .await;
    let key = random_key();
    let base_url = model.base_url();

    let home = Home::new();
    let file = home.blueprint("secrets", BLUEPRINT);
    let env = [
        ("BOITATA_PROVIDER", "openai"),
        ("BOITATA_MODEL", "gpt-test"),
        ("BOITATA_BASE_URL", base_url.as_str()),
        ("OPENAI_API_KEY", key.as_str()),
    ];
    let file_arg = file.display().to_string();
    let (mut child, mut lines) = tokio::task::block_in_place(|| {
        home.spawn_with_env(
            &["run", "look around", "--json", "--blueprint", &file_arg],
            &env,
        )
    });
    let mut seen: Vec<Event> = Vec::new();
    let started = tokio::task::block_in_place(|| {
        try_read_until(&mut lines, &mut seen, |e| {
            e.node.as_deref() == Some("work") && e.payload.kind() == "tool_call"
        })
    });
    assert!(
        started,
        "the agent's command never started; stderr: {}\n{seen:#?}",
        home.stderr()
    );
    let sandbox = seen
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::SandboxProvisioned { sandbox_id, .. } => Some(sandbox_id.clone()),
            _ => None,
        })
        .unwrap();

    // While the agent works: the sandbox's configuration holds no secret.
    let inspect = docker_ok(&["inspect", "--type", "container", &sandbox]);
    let secret = agent_secret_from_the_host(&sandbox);
    match &secret {
        Some(secret) => assert_eq!(secret.len(), 64, "a 32-byte hex secret"),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true: the test must be able to read the agent's environment from the host")
        }
        None => eprintln!("note: cannot read the agent's environment from the host (not root): the run secret is not checked"),
    }
    let doc: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    let config = &doc[0]["Config"];
    let container_env = config["Env"].to_string();
    let labels = config["Labels"].to_string();
    for text in [&inspect, &container_env, &labels] {
        assert!(!text.contains(&key), "the API key is in docker inspect");
        assert!(!text.contains("OPENAI_API_KEY"), "{text}");
        assert!(!text.contains("BOITATA_AGENT_SECRET"), "{text}");
        if let Some(secret) = &secret {
            assert!(
                !text.contains(secret),
                "the run secret is in docker inspect"
            );
        }
    }
    // On the run's own network, where the host is its gateway address.
    let network = doc[0]["HostConfig"]["NetworkMode"]
        .as_str()
        .unwrap_or_default();
    assert!(
        network.starts_with("boitata-run-"),
        "{}",
        doc[0]["HostConfig"]
    );
    let gateway = docker(&[
        "network",
        "inspect",
        network,
        "--format",
        "{{(index .IPAM.Config 0).Gateway}}",
    ]);
    let gateway = String::from_utf8_lossy(&gateway.stdout).trim().to_owned();
    assert!(
        doc[0]["HostConfig"]["ExtraHosts"]
            .to_string()
            .contains(&format!("host.docker.internal:{gateway}")),
        "{}",
        doc[0]["HostConfig"]
    );
    // The sandbox's user cannot read the agent's launch environment either.
    let from_inside = docker(&[
        "exec",
        &sandbox,
        "sh",
        "-c",
        "for p in /proc/[0-9]*; do if [ \"$(cat $p/comm)\" = boitata-agent ]; then cat $p/environ; fi; done",
    ]);
    let inside = String::from_utf8_lossy(&from_inside.stdout);
    assert!(!inside.contains(&key) && !inside.contains("BOITATA_AGENT_SECRET"));
    assert!(
        String::from_utf8_lossy(&from_inside.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&from_inside.stderr)
    );

    for line in lines.by_ref() {
        seen.push(serde_json::from_str(&line.unwrap()).unwrap());
    }
    let status = tokio::task::block_in_place(|| child.wait()).unwrap();
    let events = seen;
    let _scope = assert_torn_down(&events);
    assert_eq!(status.code(), Some(0), "{events:#?}");
    let EventPayload::RunFinished { status, .. } = &events.last().unwrap().payload else {
        panic!()
    };
    assert_eq!(*status, RunStatus::Succeeded);

    // The openai provider worked from inside the sandbox, with the key.
    let requests = model.requests().await;
    assert_eq!(requests.len(), 2, "two model requests");
    for request in &requests {
        let auth = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert_eq!(auth, format!("Bearer {key}"));
    }
    // The agent's command saw neither secret: not in its environment, not in /proc.
    let probe = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::ToolResult { output, .. } if e.node.as_deref() == Some("work") => {
                Some(output.clone())
            }
            _ => None,
        })
        .unwrap();
    assert!(probe.contains("secret variables seen: 0"), "{probe}");
    assert!(probe.contains("Permission denied"), "{probe}");
    let answer = events.iter().any(|e| {
        matches!(&e.payload, EventPayload::AgentMessage { text } if text.contains("nothing to do"))
    });
    assert!(answer, "{events:#?}");

    // No stored event holds a secret: the --json stream, and the run store.
    let run_id = events[0].run_id.clone();
    let stored = home
        .boitata()
        .args(["runs", "show", &run_id, "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(stored.status.success());
    let stored = String::from_utf8_lossy(&stored.stdout).into_owned();
    assert!(stored.contains("\"run_finished\""), "{stored}");
    let streamed: String = events.iter().map(Event::to_json_line).collect();
    for text in [&stored, &streamed] {
        assert!(!text.contains(&key), "the API key is in an event");
        if let Some(secret) = &secret {
            assert!(!text.contains(secret), "the run secret is in an event");
        }
    }

    // Nor the image.
    let history = docker_ok(&["history", "--no-trunc", AGENT_IMAGE]);
    let image = docker_ok(&["image", "inspect", AGENT_IMAGE]);
    for text in [&history, &image] {
        assert!(!text.contains(&key));
        assert!(!text.contains("OPENAI_API_KEY") && !text.contains("BOITATA_AGENT_SECRET"));
        if let Some(secret) = &secret {
            assert!(!text.contains(secret));
        }
    }
}
