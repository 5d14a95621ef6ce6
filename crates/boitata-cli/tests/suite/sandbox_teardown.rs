//! Sandboxed blueprints through `boitata run`: exit-code routing in a sandbox, and
//! teardown after success, failure, Ctrl-C, and (with `boitata sandbox gc`) SIGKILL.

use std::time::{Duration, Instant};

use boitata_core::{EventPayload, RunStatus};
use boitata_test_support::docker::RunScope;

use super::sandbox_support::{assert_torn_down, daemon, events, read_until, Home};

const ROUTING: &str = r#"name: routing
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm", memory: 512m, pids: 128 }
  check: { type: exec, container: "{box}", command: "echo in the sandbox as $BOITATA_NODE; exit 3" }
  three: { type: exec, container: "{box}", command: "echo took the 3 edge" }
  other: { type: exec, container: "{box}", command: "echo wrong edge; exit 1" }
edges:
  - { from: box, to: check }
  - { from: check, when: success, to: other }
  - { from: check, when: 3, to: three }
  - { from: check, to: other }
"#;

#[test]
fn exit_3_takes_the_when_3_edge_and_the_sandbox_is_destroyed_after_success() {
    let Some(_daemon) = daemon("cli_sandbox_routing") else {
        return;
    };
    let home = Home::new();
    let file = home.blueprint("routing", ROUTING);
    let output = home
        .boitata()
        .args(["run", "route", "--json", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    let events = events(&output.stdout);
    let _scope = assert_torn_down(&events);
    assert_eq!(output.status.code(), Some(0), "{events:#?}");
    let nodes: Vec<&str> = events
        .iter()
        .filter(|e| e.payload.kind() == "node_started")
        .filter_map(|e| e.node.as_deref())
        .collect();
    assert_eq!(nodes, ["box", "check", "three"]);
    let chunks: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::ExecOutput { chunk, .. } => Some(chunk.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(chunks, "in the sandbox as check\ntook the 3 edge\n");

    // Human mode prints the last output on stdout.
    let output = home
        .boitata()
        .args(["run", "route", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "took the 3 edge\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("destroyed"), "{stderr}");
}

#[test]
fn a_failed_run_exits_1_and_leaves_no_container() {
    let Some(_daemon) = daemon("cli_sandbox_failure") else {
        return;
    };
    let home = Home::new();
    let file = home.blueprint(
        "fails",
        r#"name: fails
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm", network: none }
  fail: { type: exec, container: "{box}", command: "echo nope >&2; exit 9" }
edges:
  - { from: box, to: fail }
"#,
    );
    let output = home
        .boitata()
        .args(["run", "t", "--json", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let events = events(&output.stdout);
    assert!(matches!(
        events.last().unwrap().payload,
        EventPayload::RunFinished {
            status: RunStatus::Failed,
            ..
        }
    ));
    assert_torn_down(&events);
}

#[test]
fn a_missing_image_fails_the_run_with_how_to_build_it() {
    let Some(_daemon) = daemon("cli_sandbox_missing_image") else {
        return;
    };
    let home = Home::new();
    let file = home.blueprint(
        "noimage",
        "name: noimage\nentry: box\nnodes:\n  box: { type: provision, image: \"boitata-no-such-image:none\" }\n",
    );
    let output = home
        .boitata()
        .args(["run", "t", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("boitata-no-such-image:none"), "{stderr}");
    assert!(stderr.contains("scripts/build-base-image.sh"), "{stderr}");
}

const LONG: &str = r#"name: long
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm" }
  wait: { type: exec, container: "{box}", command: "echo sleeping; sleep 1000" }
  after: { type: exec, container: "{box}", command: "echo should not run" }
edges:
  - { from: box, to: wait }
  - { from: wait, to: after }
"#;

#[test]
fn ctrl_c_during_a_sleep_1000_exec_cancels_destroys_the_sandbox_and_exits_130() {
    let Some(_daemon) = daemon("cli_sandbox_sigint") else {
        return;
    };
    let home = Home::new();
    let file = home.blueprint("long", LONG);
    let (mut child, mut lines) = home.spawn(&[
        "run",
        "wait",
        "--json",
        "--blueprint",
        file.to_str().unwrap(),
    ]);
    let mut seen = Vec::new();
    read_until(&mut lines, &mut seen, |e| {
        e.node.as_deref() == Some("wait") && matches!(e.payload, EventPayload::ExecOutput { .. })
    });
    let scope = RunScope::adopt(seen[0].run_id.clone());
    assert_eq!(scope.containers().len(), 1, "the sandbox runs");

    let started = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    for line in lines {
        seen.push(serde_json::from_str(&line.unwrap()).unwrap());
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen:#?}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "cancelling took {:?}",
        started.elapsed()
    );
    assert!(matches!(
        seen.last().unwrap().payload,
        EventPayload::RunFinished {
            status: RunStatus::Cancelled,
            ..
        }
    ));
    assert!(
        !seen.iter().any(|e| e.node.as_deref() == Some("after")),
        "the walk stopped"
    );
    assert_torn_down(&seen);
}

#[test]
fn after_a_sigkill_mid_run_sandbox_gc_leaves_none() {
    let Some(_daemon) = daemon("cli_sandbox_sigkill_gc") else {
        return;
    };
    let home = Home::new();
    let file = home.blueprint("long", LONG);
    let (mut child, mut lines) = home.spawn(&[
        "run",
        "wait",
        "--json",
        "--blueprint",
        file.to_str().unwrap(),
    ]);
    let mut seen = Vec::new();
    read_until(&mut lines, &mut seen, |e| {
        e.node.as_deref() == Some("wait") && matches!(e.payload, EventPayload::ExecOutput { .. })
    });
    let run_id = seen[0].run_id.clone();
    let scope = RunScope::adopt(run_id.clone());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    drop(lines);
    assert_eq!(
        scope.containers().len(),
        1,
        "a SIGKILL leaves the sandbox behind"
    );
    let network = format!("boitata-run-{run_id}");
    assert_eq!(scope.networks(), vec![network.clone()], "and its network");
    assert!(!scope.host_rules().is_empty(), "and its host rules");

    // The store still says `running`: only the dead owner tells it is an orphan.
    let shown = home
        .boitata()
        .args(["runs", "show", &run_id, "--json"])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["run"]["status"], "running");

    let listed = home
        .boitata()
        .args(["sandbox", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        listed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let ours: Vec<&serde_json::Value> = listed
        .iter()
        .filter(|s| s["run_id"] == run_id.as_str())
        .collect();
    assert_eq!(ours.len(), 1, "{listed:#?}");
    assert_eq!(ours[0]["standing"], "orphan");
    assert_eq!(ours[0]["run_status"], "running");
    assert_eq!(ours[0]["node"], "box");

    let dry = home
        .boitata()
        .args(["sandbox", "gc", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(dry.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&dry.stdout).contains(&format!(
        "would remove {}",
        &ours[0]["id"].as_str().unwrap()[..12]
    )));
    let dry_text = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry_text.contains(&format!("would remove network {network} (run {run_id})")),
        "{dry_text}"
    );
    assert_eq!(scope.containers().len(), 1, "a dry run removes nothing");
    assert_eq!(scope.networks().len(), 1, "a dry run removes no network");

    let gc = home.boitata().args(["sandbox", "gc"]).output().unwrap();
    assert_eq!(
        gc.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    let text = String::from_utf8_lossy(&gc.stdout);
    assert!(text.contains(&format!("(run {run_id})")), "{text}");
    assert!(
        text.contains(&format!("marked run {run_id} failed (interrupted")),
        "{text}"
    );
    assert_eq!(scope.containers(), Vec::<String>::new());
    assert!(
        text.contains(&format!("removed network {network} (run {run_id})")),
        "{text}"
    );
    assert_eq!(scope.networks(), Vec::<String>::new());
    assert_eq!(
        scope.host_rules(),
        Vec::<String>::new(),
        "no host rule is left"
    );

    // The run no longer looks live: gc recorded how it ended.
    let shown = home
        .boitata()
        .args(["runs", "show", &run_id, "--json"])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["run"]["status"], "failed");
    let error = shown["run"]["error"].as_str().unwrap();
    assert!(error.starts_with("interrupted"), "{error}");
    let events = shown["events"].as_array().unwrap();
    assert_eq!(events.last().unwrap()["type"], "run_finished");
    assert_eq!(
        events.last().unwrap()["seq"].as_u64().unwrap(),
        events.len() as u64,
        "seq stays dense"
    );
}

#[test]
fn sandbox_gc_keeps_the_sandboxes_of_live_runs() {
    let Some(_daemon) = daemon("cli_sandbox_gc_keeps_live") else {
        return;
    };
    let home = Home::new();
    let file = home.blueprint("long", LONG);
    let (mut child, mut lines) = home.spawn(&[
        "run",
        "wait",
        "--json",
        "--blueprint",
        file.to_str().unwrap(),
    ]);
    let mut seen = Vec::new();
    read_until(&mut lines, &mut seen, |e| {
        e.node.as_deref() == Some("wait") && matches!(e.payload, EventPayload::ExecOutput { .. })
    });
    let scope = RunScope::adopt(seen[0].run_id.clone());
    // A dry run, so that this test does not reap other tests' orphans under their feet.
    let gc = home
        .boitata()
        .args(["sandbox", "gc", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(gc.status.code(), Some(0));
    let text = String::from_utf8_lossy(&gc.stdout);
    assert!(
        !text.contains(scope.run_id()),
        "gc would reap a live run's sandbox: {text}"
    );
    assert_eq!(scope.containers().len(), 1);
    let listed = home.boitata().args(["sandbox", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    let line = text
        .lines()
        .find(|l| l.contains(scope.run_id()))
        .unwrap_or_default();
    assert!(line.contains("live"), "{text}");

    // From another PID namespace the owner's pid means nothing: gc must leave the
    // sandbox alone rather than take its live owner for a dead one.
    let unshare_available = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if unshare_available {
        let gc = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc"])
            .arg(assert_cmd::cargo::cargo_bin("boitata"))
            .args(["sandbox", "gc", "--dry-run"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("BOITATA_DATA_DIR", home.path().join("data"))
            .envs(std::env::var("DOCKER_HOST").map(|h| ("DOCKER_HOST", h)))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&gc.stdout);
        assert_eq!(gc.status.code(), Some(0), "{text}");
        assert!(
            !text.contains(scope.run_id()),
            "gc in another PID namespace would reap a live run's sandbox: {text}"
        );
    } else {
        println!("skipping the other-PID-namespace check: `unshare --pid` is not permitted here");
    }

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    for line in lines {
        seen.push(serde_json::from_str(&line.unwrap()).unwrap());
    }
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_torn_down(&seen);
}

#[test]
fn a_bridge_sandbox_is_called_not_isolated_and_a_run_network_one_is_not() {
    let Some(_daemon) = daemon("cli_sandbox_bridge_not_isolated") else {
        return;
    };
    let home = Home::new();
    let blueprint = |network: &str| {
        format!(
            r#"name: net
entry: box
nodes:
  box: {{ type: provision, image: "boitata-base:bookworm", memory: 256m{network} }}
  hi: {{ type: exec, container: "{{box}}", command: "echo hi" }}
edges:
  - {{ from: box, to: hi }}
"#
        )
    };
    for (network, warned) in [(", network: bridge", true), ("", false)] {
        let file = home.blueprint("net", &blueprint(network));
        let output = home
            .boitata()
            .args(["run", "net", "--blueprint"])
            .arg(&file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        assert_eq!(
            stderr.contains("network bridge: not isolated"),
            warned,
            "{network:?}: {stderr}"
        );
    }
}

/// Without an `iptables` program (here: none on `PATH`), a run network cannot be
/// closed off from the host: the run fails at `provision` with one message naming
/// what is missing and the opt-out, and leaves no sandbox and no network behind; it
/// never starts a sandbox on an unfirewalled network.
#[test]
fn without_iptables_a_run_network_sandbox_is_refused_not_left_open() {
    let Some(_daemon) = daemon("cli_sandbox_without_iptables") else {
        return;
    };
    let home = Home::new();
    let file = home.blueprint(
        "closed",
        r#"name: closed
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm", memory: 256m }
  hi: { type: exec, container: "{box}", command: "echo should not run" }
edges:
  - { from: box, to: hi }
"#,
    );
    // /usr/sbin (and /sbin, its link on Debian) hold every iptables variant.
    let output = home
        .boitata()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["run", "closed", "--json", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let events = events(&output.stdout);
    let scope = RunScope::adopt(events[0].run_id.clone());
    let finished = events.last().unwrap().to_json_line();
    assert!(
        finished.contains("no iptables program can be run here")
            && finished.contains("network: bridge"),
        "{finished}"
    );
    assert!(
        !events.iter().any(|e| e.payload.kind() == "exec_output"),
        "a command ran: {events:#?}"
    );
    assert_eq!(scope.containers(), Vec::<String>::new(), "sandbox left");
    assert_eq!(scope.networks(), Vec::<String>::new(), "network left");
}
