//! Run networks against a real daemon and real host rules: what a sandbox can reach
//! (its run's other sandboxes, the ports the run opens on the gateway) and what it
//! cannot (another run's sandboxes, by address or name; the host's other services).

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use boitata_orchestrator::egress::EgressPolicy;
use boitata_orchestrator::network::Firewall;
use boitata_orchestrator::reaper;
use boitata_orchestrator::sandbox::run_network_interface;
use boitata_orchestrator::{
    CollectOutput, DockerBackend, Egress, ExecSpec, RunSandboxes, Sandbox, SandboxId,
};
use boitata_test_support::docker::RunScope;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::{emitter, run_spec, setup, Events};

fn tracker(backend: &Arc<DockerBackend>, scope: &RunScope) -> (RunSandboxes, Arc<Events>) {
    let (emitter, events) = emitter(scope.run_id());
    (RunSandboxes::new(backend.clone(), emitter), events)
}

/// Connects from inside the sandbox to `host:port` and prints `ok TEXT` (what the
/// server sent), `timeout`, `refused`, `noname` or `error …`.
const PROBE: &str = r#"
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
try:
    s = socket.create_connection((host, port), timeout=3)
    print("ok", s.recv(100).decode())
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except socket.gaierror:
    print("noname")
except OSError as e:
    print("error", e)
"#;

/// A TCP server on port 8000 that greets every connection with `$1`.
const GREETER: &str = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8000))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[1].encode())
    c.close()
"#;

async fn probe(backend: &DockerBackend, id: &SandboxId, host: &str, port: u16) -> String {
    let mut out = CollectOutput::default();
    backend
        .exec(
            id,
            &ExecSpec::new(["python3", "-c", PROBE, host, &port.to_string()]),
            &mut out,
        )
        .await
        .unwrap();
    assert!(out.stderr.is_empty(), "{}", out.stderr_text());
    out.stdout_text().trim().to_owned()
}

/// Starts the greeter in `id` and waits until it answers there.
async fn greet(backend: &DockerBackend, id: &SandboxId, greeting: &str) {
    backend
        .exec(
            id,
            &ExecSpec::new(["python3", "-c", GREETER, greeting]).detached(),
            &mut CollectOutput::default(),
        )
        .await
        .unwrap();
    for _ in 0..50 {
        if probe(backend, id, "127.0.0.1", 8000).await == format!("ok {greeting}") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the greeter in {} never answered", id.short());
}

/// The sandbox's address and container name.
fn address_and_name(
    daemon: &boitata_test_support::docker::Daemon,
    id: &SandboxId,
) -> (String, String) {
    let doc = daemon.inspect(id.as_str());
    let networks = doc["NetworkSettings"]["Networks"].as_object().unwrap();
    assert_eq!(networks.len(), 1, "{networks:?}");
    let address = networks.values().next().unwrap()["IPAddress"]
        .as_str()
        .unwrap()
        .to_owned();
    let name = doc["Name"]
        .as_str()
        .unwrap()
        .trim_start_matches('/')
        .to_owned();
    (address, name)
}

/// Serves `greeting` to every connection on `address`.
async fn host_server(address: IpAddr, greeting: &'static str) -> u16 {
    let listener = TcpListener::bind((address, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(greeting.as_bytes()).await;
        }
    });
    port
}

/// The address of `docker0`, Docker's default bridge, on this host.
fn docker0_address(daemon_inspect: &str) -> String {
    let doc: serde_json::Value = serde_json::from_str(daemon_inspect).unwrap();
    doc[0]["IPAM"]["Config"][0]["Gateway"]
        .as_str()
        .unwrap_or("172.17.0.1")
        .to_owned()
}

#[tokio::test]
async fn runs_are_apart_and_the_host_is_closed_but_for_the_ports_the_run_opens() {
    let Some((daemon, scope_a, backend)) = setup("network_isolation_a") else {
        return;
    };
    let scope_b = daemon.run_scope("network_isolation_b");
    let backend = Arc::new(backend);
    let (run_a, _) = tracker(&backend, &scope_a);
    let (run_b, _) = tracker(&backend, &scope_b);

    let (a1, a2, b1) = tokio::join!(
        run_a.provision(Some("a1"), run_spec(&scope_a)),
        run_a.provision(Some("a2"), run_spec(&scope_a)),
        run_b.provision(Some("b1"), run_spec(&scope_b)),
    );
    let (a1, a2, b1) = (a1.unwrap(), a2.unwrap(), b1.unwrap());
    greet(&backend, &a2, "a2").await;
    greet(&backend, &b1, "b1").await;
    let (a2_address, a2_name) = address_and_name(&daemon, &a2);
    let (b1_address, b1_name) = address_and_name(&daemon, &b1);

    // A sandbox reaches the other sandboxes of its run, by address and by name...
    assert_eq!(probe(&backend, &a1, &a2_address, 8000).await, "ok a2");
    assert_eq!(probe(&backend, &a1, &a2_name, 8000).await, "ok a2");
    // ...and nothing of another run, either way.
    let by_address = probe(&backend, &a1, &b1_address, 8000).await;
    assert!(!by_address.starts_with("ok"), "{by_address}");
    assert_eq!(probe(&backend, &a1, &b1_name, 8000).await, "noname");
    let back = probe(&backend, &b1, &a2_address, 8000).await;
    assert!(!back.starts_with("ok"), "{back}");

    // The host: a service on the run network's own gateway address is out of reach
    // (the packets are dropped: a timeout, not a refusal)...
    let network = run_a.run_network().unwrap();
    let gateway = network.gateway();
    let closed = host_server(gateway, "host service").await;
    assert_eq!(
        probe(&backend, &a1, &gateway.to_string(), closed).await,
        "timeout"
    );
    // ...and so is every other host address, docker0's included.
    let docker0 = docker0_address(&boitata_test_support::docker::docker_ok(&[
        "network", "inspect", "bridge",
    ]));
    assert_eq!(probe(&backend, &a1, &docker0, closed).await, "timeout");
    // A port the run opens on the gateway address is reached (the model gateway's way).
    let opened = host_server(gateway, "gateway").await;
    network.allow_port(opened).await.unwrap();
    assert_eq!(network.allowed_ports(), [opened].into_iter().collect());
    assert_eq!(
        probe(&backend, &a1, &gateway.to_string(), opened).await,
        "ok gateway"
    );
    // Not from another run: its network has its own gateway, and this port is not open
    // there.
    let b_gateway = run_b.run_network().unwrap().gateway();
    assert_ne!(b_gateway, gateway);
    let from_b = probe(&backend, &b1, &gateway.to_string(), opened).await;
    assert!(!from_b.starts_with("ok"), "{from_b}");
    // No way out at all (Docker drops what an internal network forwards).
    let out = probe(&backend, &a1, "192.0.2.1", 80).await;
    assert!(out == "timeout" || out.starts_with("error"), "{out}");

    // The orchestrator reaches a sandbox's port on its address on the network.
    let endpoint = backend.endpoint(&a2, 8000).await;
    assert!(endpoint.is_err(), "8000 was not asked for: {endpoint:?}");

    for run in [&run_a, &run_b] {
        let report = run.teardown().await;
        assert!(report.network_failed.is_none(), "{report:?}");
    }
    for scope in [&scope_a, &scope_b] {
        assert!(scope.networks().is_empty());
        assert_eq!(scope.host_rules(), Vec::<String>::new());
    }
}

#[tokio::test]
async fn egress_none_closes_even_the_opened_ports() {
    let Some((_daemon, scope, backend)) = setup("network_egress_none") else {
        return;
    };
    let backend = Arc::new(backend);
    let (run, _) = tracker(&backend, &scope);
    let open = run.provision(Some("open"), run_spec(&scope)).await.unwrap();
    let mut closed_spec = run_spec(&scope);
    closed_spec.egress = Egress::None;
    let closed = run.provision(Some("closed"), closed_spec).await.unwrap();
    let network = run.run_network().unwrap();
    let gateway = network.gateway();
    let port = host_server(gateway, "gateway").await;
    network.allow_port(port).await.unwrap();
    assert_eq!(
        probe(&backend, &open, &gateway.to_string(), port).await,
        "ok gateway"
    );
    assert_eq!(
        probe(&backend, &closed, &gateway.to_string(), port).await,
        "timeout"
    );
    run.teardown().await;
    assert_eq!(scope.host_rules(), Vec::<String>::new());
}

/// Fetches `$1` with urllib through the proxy in the environment (or without any
/// proxy when `$2` is `direct`) and prints `STATUS BODY` or `error …`.
const FETCH: &str = r#"
import sys, urllib.request, urllib.error
url, how = sys.argv[1], sys.argv[2]
handlers = [urllib.request.ProxyHandler({})] if how == "direct" else []
opener = urllib.request.build_opener(*handlers)
try:
    with opener.open(url, timeout=5) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
except Exception as e:
    print("error", e)
"#;

async fn fetch(backend: &DockerBackend, id: &SandboxId, url: &str, how: &str) -> String {
    let mut out = CollectOutput::default();
    // The request goes through the proxy even to 127.0.0.1 (NO_PROXY lists it for the
    // sandbox's own services).
    let spec = ExecSpec::new(["python3", "-c", FETCH, url, how])
        .env("NO_PROXY", "")
        .env("no_proxy", "");
    backend.exec(id, &spec, &mut out).await.unwrap();
    out.stdout_text().trim().to_owned()
}

#[tokio::test]
async fn egress_allow_lets_through_what_the_policy_names_and_reports_each_decision() {
    let Some((daemon, scope, backend)) = setup("network_egress_allow") else {
        return;
    };
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/hello"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("hello from the host"))
        .mount(&server)
        .await;
    let port = server.address().port();
    let other = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_port = other.local_addr().unwrap().port();

    let backend = Arc::new(backend);
    let (run, events) = tracker(&backend, &scope);
    let mut spec = run_spec(&scope);
    spec.egress = Egress::Allow(EgressPolicy::new(&[format!("127.0.0.1:{port}")], false).unwrap());
    let id = run.provision(Some("box"), spec).await.unwrap();

    let env = sandbox_env(&daemon, &id);
    let proxy = env.get("HTTP_PROXY").expect("HTTP_PROXY is set");
    let gateway = run.run_network().unwrap().gateway().to_string();
    assert!(proxy.starts_with(&format!("http://{gateway}:")), "{proxy}");
    assert_eq!(env.get("HTTPS_PROXY"), Some(proxy));
    assert!(env["NO_PROXY"].split(',').any(|h| h == gateway), "{env:?}");

    let allowed = fetch(
        &backend,
        &id,
        &format!("http://127.0.0.1:{port}/hello"),
        "proxy",
    )
    .await;
    assert_eq!(allowed, "200 hello from the host");
    let refused = fetch(
        &backend,
        &id,
        &format!("http://127.0.0.1:{other_port}/"),
        "proxy",
    )
    .await;
    assert!(refused.starts_with("403 egress refused"), "{refused}");
    assert!(
        refused.contains("not in the node's egress allow list"),
        "{refused}"
    );
    // Without the proxy there is no way: not to the host, not out.
    let direct = fetch(
        &backend,
        &id,
        &format!("http://{gateway}:{port}/hello"),
        "direct",
    )
    .await;
    assert!(direct.starts_with("error"), "{direct}");
    let out = fetch(&backend, &id, "http://192.0.2.1/", "direct").await;
    assert!(out.starts_with("error"), "{out}");

    run.teardown().await;
    let egress = events.egress();
    assert_eq!(egress.len(), 2, "{egress:?}");
    let (host, p, _, reason, up, down) = egress.iter().find(|e| e.2).unwrap();
    assert_eq!((host.as_str(), *p), ("127.0.0.1", port));
    assert!(reason.contains(&format!("127.0.0.1:{port}")), "{reason}");
    assert!(*up > 0 && *down > 0, "{egress:?}");
    let (host, p, ok, reason, ..) = egress.iter().find(|e| !e.2).unwrap();
    assert_eq!((host.as_str(), *p, *ok), ("127.0.0.1", other_port, false));
    assert!(reason.contains("not in"), "{reason}");
    assert_eq!(scope.host_rules(), Vec::<String>::new());
}

fn sandbox_env(
    daemon: &boitata_test_support::docker::Daemon,
    id: &SandboxId,
) -> std::collections::HashMap<String, String> {
    daemon.inspect(id.as_str())["Config"]["Env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str()?.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[tokio::test]
async fn gc_removes_the_network_and_host_rules_a_dead_run_left() {
    let Some((_daemon, scope, backend)) = setup("network_gc") else {
        return;
    };
    let backend = Arc::new(backend);
    let (run, _) = tracker(&backend, &scope);
    run.provision(Some("box"), run_spec(&scope)).await.unwrap();
    let network = format!("boitata-run-{}", scope.run_id());
    // The run's process is "gone": nothing tears it down.
    drop(run);
    assert_eq!(scope.networks(), vec![network.clone()]);
    assert!(!scope.host_rules().is_empty());

    let dead = scope.run_id().to_owned();
    let sandboxes = reaper::gc_where(backend.as_ref(), |info| {
        info.run_id() != Some(dead.as_str())
    })
    .await
    .unwrap();
    assert_eq!(sandboxes.removed.len(), 1);
    let networks =
        reaper::gc_networks_where(backend.as_ref(), |n| n.run_id() != Some(dead.as_str()))
            .await
            .unwrap();
    let removed: HashSet<&str> = networks.removed.iter().map(|n| n.name.as_str()).collect();
    assert!(removed.contains(network.as_str()), "{networks:?}");
    assert!(networks.failed.is_empty(), "{:?}", networks.failed);
    assert!(scope.networks().is_empty());
    assert_eq!(scope.host_rules(), Vec::<String>::new());
}

#[tokio::test]
async fn a_run_network_is_on_the_bridge_named_after_the_run_with_its_rules_on_it() {
    let Some((_daemon, scope, backend)) = setup("network_bridge_name") else {
        return;
    };
    let backend = Arc::new(backend);
    let (run, _) = tracker(&backend, &scope);
    let network = run.ensure_run_network().await.unwrap();
    let planned = run_network_interface(scope.run_id());
    assert_eq!(network.interface(), planned);
    assert!(std::path::Path::new("/sys/class/net")
        .join(&planned)
        .exists());
    // The jump to the run's chain and the DROP, on that bridge, and the chain's
    // ESTABLISHED rule.
    let rules = network.firewall().rules_of(scope.run_id()).await.unwrap();
    assert_eq!(rules.len(), 3, "{rules:?}");
    let on_bridge: Vec<&String> = rules
        .iter()
        .filter(|r| r.contains(&format!("-i {planned} ")))
        .collect();
    assert_eq!(on_bridge.len(), 2, "{rules:?}");
    assert!(
        on_bridge.iter().any(|r| r.ends_with("-j DROP")),
        "{rules:?}"
    );
    assert!(
        rules
            .iter()
            .any(|r| r.contains("RELATED,ESTABLISHED") && r.ends_with("-j ACCEPT")),
        "{rules:?}"
    );

    let report = run.teardown().await;
    assert!(report.network_failed.is_none(), "{report:?}");
    assert!(scope.networks().is_empty());
    let firewall = Firewall::detect().await.unwrap();
    assert_eq!(
        firewall.rules_of(scope.run_id()).await.unwrap(),
        Vec::<String>::new()
    );
    assert!(!std::path::Path::new("/sys/class/net")
        .join(&planned)
        .exists());
}

#[tokio::test]
async fn host_rules_are_removed_whole_even_when_one_went_missing() {
    let Some((_daemon, scope, _backend)) = setup("network_rules_batch") else {
        return;
    };
    let firewall = Firewall::detect().await.unwrap();
    let run = scope.run_id();
    // An interface that does not exist: rules on it match nothing.
    let interface = run_network_interface(run);
    let gateway: IpAddr = "192.0.2.1".parse().unwrap();
    let sandbox: IpAddr = "192.0.2.7".parse().unwrap();

    firewall.isolate(run, &interface).await.unwrap();
    firewall.allow_port(run, gateway, 4242).await.unwrap();
    firewall.deny_source(run, sandbox).await.unwrap();
    let rules = firewall.rules_of(run).await.unwrap();
    assert_eq!(rules.len(), 5, "{rules:?}");
    assert!(
        rules.iter().any(|r| r.contains("--dport 4242")),
        "{rules:?}"
    );
    assert!(
        rules.iter().any(|r| r.contains("-s 192.0.2.7/32")),
        "{rules:?}"
    );
    firewall.remove_isolation(run, &interface).await.unwrap();
    assert_eq!(firewall.rules_of(run).await.unwrap(), Vec::<String>::new());
    assert!(!firewall.runs_with_rules().await.unwrap().contains(run));

    // One rule removed by hand: the batch no longer fits, the rest goes all the same.
    firewall.isolate(run, &interface).await.unwrap();
    let drop_rule = firewall
        .rules_of(run)
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.starts_with("-A INPUT") && r.ends_with("-j DROP"))
        .unwrap();
    let mut delete = vec!["-w", "10", "-D"];
    delete.extend(drop_rule.split_whitespace().skip(1));
    let status = std::process::Command::new(firewall.program())
        .args(&delete)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(firewall.rules_of(run).await.unwrap().len(), 2);
    firewall.remove_isolation(run, &interface).await.unwrap();
    assert_eq!(firewall.rules_of(run).await.unwrap(), Vec::<String>::new());
    assert!(!firewall.runs_with_rules().await.unwrap().contains(run));
}
