//! Credentials never enter the sandbox: the seed blueprint
//! (examples/blueprints/containerized_task.yaml) with the `openai` provider against a
//! fake model server on the host's loopback, which no sandbox can reach. The agent in
//! the sandbox gets the model gateway's URL and a per-run gateway token; the gateway
//! (in the `boitata` process) forwards with the real key.
//!
//! The real key is in none of: `docker inspect`, the image, `/proc/*/environ` and the
//! files inside the sandbox (read as root), the events, the store. The fake server saw
//! it on every request. The run's own secret and the gateway token are in no event.

use std::time::Duration;

use boitata_core::{Event, EventPayload, RunStatus};
use boitata_test_support::docker::{docker, docker_ok, repo_root, AGENT_IMAGE};
use boitata_test_support::events::usage;
use boitata_test_support::openai::{
    done, finish_chunk, openai_sse, text_reply, tool_call_chunk, usage_chunk,
};
use boitata_test_support::repo::TempRepo;
use boitata_test_support::FakeModel;

use super::sandbox_support::{agent_daemon, assert_torn_down, try_read_until, Home};

/// What the model has the agent run: count secret-looking variables in its own
/// environment, try to read the agent's launch environment from /proc, make the
/// seed blueprint's test pass, then wait a little so the test can look at the sandbox
/// while the turn is under way.
const PROBE: &str = r#"echo "secret variables seen: $(env | grep -c -e OPENAI_API_KEY -e BOITATA_AGENT_SECRET)"; for p in /proc/[0-9]*; do if [ "$(cat $p/comm 2>/dev/null)" = boitata-agent ]; then tr '\0' '\n' < $p/environ; fi; done; touch fixed; sleep 6"#;

fn random_key() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("sk-test-{nanos:x}{:x}", std::process::id())
}

/// The agent's launch environment, read by the test from the host's /proc (the host
/// is root over its containers; the sandbox's own users are not), or `None` when this
/// process may not.
fn agent_environment(sandbox: &str) -> Option<Vec<(String, String)>> {
    let top = docker_ok(&["top", sandbox, "-eo", "pid,comm"]);
    let pid = top
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("boitata-agent"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no boitata-agent in the sandbox: {top}"))
        .to_owned();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        environ
            .split(|b| *b == 0)
            .filter_map(|kv| std::str::from_utf8(kv).ok())
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    )
}

fn var<'a>(env: &'a [(String, String)], name: &str) -> &'a str {
    env.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("{name} is not in the agent's environment"))
}

#[allow(clippy::print_stderr)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_key_stays_on_the_host_and_the_agent_uses_the_gateway() {
    let Some(_daemon) = agent_daemon("containerized_secrets") else {
        return;
    };
    // On loopback only: a sandbox cannot reach it, so every request it gets comes
    // from the host (the gateway).
    let model = FakeModel::openai().await;
    let arguments = serde_json::json!({ "command": PROBE }).to_string();
    model
        .push(openai_sse(vec![
            tool_call_chunk(0, Some("call_1"), Some("execute_command"), &arguments),
            finish_chunk("tool_calls"),
            usage_chunk(300, 20),
            done(),
        ]))
        .await;
    model.push(text_reply("I made the test pass.")).await;
    let key = random_key();
    let base_url = model.base_url();
    assert!(base_url.starts_with("http://127.0.0.1:"), "{base_url}");

    let repo = TempRepo::new();
    let home = Home::new();
    let seed = repo_root().join("examples/blueprints/containerized_task.yaml");
    let env = [
        ("BOITATA_PROVIDER", "openai"),
        ("BOITATA_MODEL", "gpt-test"),
        ("BOITATA_BASE_URL", base_url.as_str()),
        ("OPENAI_API_KEY", key.as_str()),
    ];
    let seed_arg = seed.display().to_string();
    let repo_param = format!("repo={}", repo.path().display());
    let (mut child, mut lines) = tokio::task::block_in_place(|| {
        home.spawn_with_env(
            &[
                "run",
                "make the tests pass",
                "--json",
                "--blueprint",
                &seed_arg,
                "--param",
                &repo_param,
                "--param",
                "test_command=test -f fixed",
            ],
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

    // While the agent works: what it was given is the gateway, not the provider.
    let inspect = docker_ok(&["inspect", "--type", "container", &sandbox]);
    let doc: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    let gateway_ip = doc[0]["NetworkSettings"]["Networks"]
        .as_object()
        .and_then(|networks| networks.values().find_map(|n| n["Gateway"].as_str()))
        .filter(|ip| !ip.is_empty())
        .unwrap_or_else(|| panic!("no network gateway: {}", doc[0]["NetworkSettings"]))
        .to_owned();
    let agent_env = agent_environment(&sandbox);
    let (token, secret) = match &agent_env {
        Some(env) => {
            let token = var(env, "OPENAI_API_KEY").to_owned();
            assert!(token.starts_with("bgw-") && token.len() == 68, "{token}");
            assert_ne!(token, key);
            let agent_url = var(env, "BOITATA_BASE_URL");
            assert!(
                agent_url.starts_with(&format!("http://{gateway_ip}:")),
                "the agent's base_url is the gateway on its network: {agent_url}"
            );
            assert!(
                env.iter().all(|(_, v)| !v.contains(&key)),
                "the key is in the agent's environment"
            );
            (
                Some(token),
                Some(var(env, "BOITATA_AGENT_SECRET").to_owned()),
            )
        }
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true: the test must be able to read the agent's environment from the host")
        }
        None => {
            eprintln!("note: cannot read the agent's environment from the host (not root): the token and secret are not checked");
            (None, None)
        }
    };
    let secrets: Vec<&String> = [&token, &secret].into_iter().flatten().collect();
    for text in [&inspect] {
        assert!(!text.contains(&key), "the API key is in docker inspect");
        assert!(!text.contains("OPENAI_API_KEY"), "{text}");
        for s in &secrets {
            assert!(
                !text.contains(s.as_str()),
                "a run secret is in docker inspect"
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
    // Inside the sandbox, even as root: no process environment, no file holds the key.
    let environs = docker(&[
        "exec",
        "-u",
        "0",
        &sandbox,
        "sh",
        "-c",
        "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null",
    ]);
    let environs = String::from_utf8_lossy(&environs.stdout);
    // (The agent itself is not dumpable, so even the sandbox's root, without
    // CAP_SYS_PTRACE, cannot read its environment; the other processes' it can.)
    assert!(
        environs.contains("PATH="),
        "root reads the sandbox's environments: {environs}"
    );
    assert!(
        !environs.contains(&key),
        "the key is in a process environment in the sandbox"
    );
    // The sandbox's files, read from the host (the sandbox's root has no
    // CAP_DAC_OVERRIDE): every place a process there can write, and what the
    // container changed over its image.
    let pid = docker_ok(&["inspect", "-f", "{{.State.Pid}}", &sandbox]);
    let root = format!("/proc/{}/root", pid.trim());
    let mut places: Vec<String> = ["tmp", "var/tmp", "workspace", "home", "root", "etc", "run"]
        .iter()
        .map(|dir| format!("{root}/{dir}"))
        .filter(|dir| std::path::Path::new(dir).exists())
        .collect();
    if let Some(upper) = doc[0]["GraphDriver"]["Data"]["UpperDir"].as_str() {
        places.push(upper.to_owned());
    }
    match std::process::Command::new("grep")
        .args(["-rlF", &key])
        .args(&places)
        .output()
    {
        Ok(found) if std::fs::metadata(format!("{root}/tmp")).is_ok() => {
            assert_eq!(
                found.status.code(),
                Some(1),
                "grep finds the key in no file of the sandbox: {}{}",
                String::from_utf8_lossy(&found.stdout),
                String::from_utf8_lossy(&found.stderr)
            );
        }
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true: the test must be able to read the sandbox's files from the host")
        }
        _ => {
            eprintln!("note: cannot read the sandbox's files from the host (not root): not checked")
        }
    }
    // The sandbox's user cannot read the agent's launch environment.
    let from_inside = docker(&[
        "exec",
        &sandbox,
        "sh",
        "-c",
        "for p in /proc/[0-9]*; do if [ \"$(cat $p/comm)\" = boitata-agent ]; then cat $p/environ; fi; done",
    ]);
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
    assert_eq!(
        status.code(),
        Some(0),
        "stderr: {}\n{events:#?}",
        home.stderr()
    );
    let EventPayload::RunFinished { status, .. } = &events.last().unwrap().payload else {
        panic!()
    };
    assert_eq!(*status, RunStatus::Succeeded);

    // The fake server saw the real key on every request (and only the host can reach it).
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
    // The gateway counted usage from the provider's answers: 300+20, then 10+5.
    assert_eq!(
        usage(&events),
        vec![(300, 20), (10, 5)],
        "one usage event per request, none from the agent"
    );
    // The agent's command saw no secret: not in its environment, not in /proc.
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

    // No event holds the key, the token or the secret: the --json stream, and the store.
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
        for s in &secrets {
            assert!(!text.contains(s.as_str()), "a run secret is in an event");
        }
    }
    let mut store_files = Vec::new();
    collect_files(&home.path().join("data"), &mut store_files);
    assert!(!store_files.is_empty(), "the store is under the data dir");
    for file in store_files {
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&key), "the key is in {}", file.display());
    }

    // Nor the image.
    let history = docker_ok(&["history", "--no-trunc", AGENT_IMAGE]);
    let image = docker_ok(&["image", "inspect", AGENT_IMAGE]);
    for text in [&history, &image] {
        assert!(!text.contains(&key));
        assert!(!text.contains("OPENAI_API_KEY") && !text.contains("BOITATA_AGENT_SECRET"));
    }
}

/// Every file under `dir`, recursively.
fn collect_files(dir: &std::path::Path, into: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, into);
        } else {
            into.push(path);
        }
    }
}
