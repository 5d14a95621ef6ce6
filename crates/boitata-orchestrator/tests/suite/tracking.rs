use std::sync::Arc;
use std::time::Duration;

use boitata_orchestrator::{DockerBackend, RunSandboxes};

use super::{emitter, run_spec, setup};

#[tokio::test]
async fn teardown_destroys_every_sandbox_with_an_event_each() {
    let Some((daemon, scope, backend)) = setup("teardown_all") else {
        return;
    };
    let (emitter, events) = emitter(scope.run_id());
    let sandboxes = RunSandboxes::new(Arc::new(backend), emitter);
    let a = sandboxes
        .provision(Some("a"), run_spec(&scope))
        .await
        .unwrap();
    let b = sandboxes
        .provision(Some("b"), run_spec(&scope))
        .await
        .unwrap();
    assert_eq!(scope.containers().len(), 2);
    assert_eq!(
        daemon.inspect(a.as_str())["Config"]["Labels"]["boitata.node"],
        "a"
    );
    assert_eq!(sandboxes.live(), vec![a.clone(), b.clone()]);

    // Both on the run's own network, closed to the host by rules of its own.
    let network = format!("boitata-run-{}", scope.run_id());
    assert_eq!(scope.networks(), vec![network.clone()]);
    assert_eq!(
        daemon.inspect(a.as_str())["HostConfig"]["NetworkMode"],
        network.as_str()
    );
    assert!(!scope.host_rules().is_empty());

    let report = sandboxes.teardown().await;
    assert_eq!(report.destroyed.len(), 2, "{report:?}");
    assert!(report.failed.is_empty(), "{report:?}");
    assert!(scope.containers().is_empty());
    assert_eq!(report.network_removed.as_deref(), Some(network.as_str()));
    assert!(report.network_failed.is_none(), "{report:?}");
    assert!(scope.networks().is_empty());
    assert_eq!(scope.host_rules(), Vec::<String>::new());
    let kinds = events.kinds();
    assert_eq!(
        kinds,
        vec![
            ("sandbox_provisioned", Some("a".into())),
            ("sandbox_provisioned", Some("b".into())),
            ("sandbox_destroyed", Some("a".into())),
            ("sandbox_destroyed", Some("b".into())),
        ]
    );

    // After teardown: no new sandbox, and a second teardown is harmless.
    let err = sandboxes
        .provision(Some("c"), run_spec(&scope))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is ending"), "{err}");
    assert!(sandboxes.teardown().await.destroyed.is_empty());
    assert!(scope.containers().is_empty());
}

#[tokio::test]
async fn a_provision_cancelled_midway_is_still_torn_down() {
    let Some((_daemon, scope, backend)) = setup("teardown_cancelled_provision") else {
        return;
    };
    let (emitter, _events) = emitter(scope.run_id());
    let sandboxes = RunSandboxes::new(Arc::new(backend), emitter);
    for _ in 0..3 {
        // Drop the provision future after a few milliseconds, at whatever point it is.
        let provision = sandboxes.provision(Some("box"), run_spec(&scope));
        let _ = tokio::time::timeout(Duration::from_millis(30), provision).await;
    }
    let report = sandboxes.teardown().await;
    assert!(report.failed.is_empty(), "{report:?}");
    assert!(
        scope.containers().is_empty(),
        "leaked: {:?}",
        scope.containers()
    );
    assert!(
        scope.networks().is_empty(),
        "leaked: {:?}",
        scope.networks()
    );
    assert_eq!(scope.host_rules(), Vec::<String>::new());
}

#[tokio::test]
async fn a_panicking_task_that_provisioned_still_gets_teardown() {
    let Some((_daemon, scope, backend)) = setup("teardown_after_panic") else {
        return;
    };
    let (emitter, events) = emitter(scope.run_id());
    let sandboxes = RunSandboxes::new(Arc::new(backend), emitter);
    let in_node = sandboxes.clone();
    let spec = run_spec(&scope);
    let node = tokio::spawn(async move {
        in_node.provision(Some("boom"), spec).await.unwrap();
        panic!("node panicked after provisioning");
    });
    assert!(node.await.unwrap_err().is_panic());
    assert_eq!(scope.containers().len(), 1);
    let report = sandboxes.teardown().await;
    assert_eq!(report.destroyed.len(), 1);
    assert!(scope.containers().is_empty());
    assert!(events
        .kinds()
        .contains(&("sandbox_destroyed", Some("boom".into()))));
}

#[tokio::test]
async fn teardown_of_a_run_without_sandboxes_never_touches_the_daemon() {
    let backend = DockerBackend::with_host("unix:///nonexistent/boitata-test/docker.sock");
    let (emitter, events) = emitter("run-without-sandboxes");
    let sandboxes = RunSandboxes::new(Arc::new(backend), emitter);
    let report = sandboxes.teardown().await;
    assert!(
        report.destroyed.is_empty() && report.failed.is_empty(),
        "{report:?}"
    );
    assert!(events.kinds().is_empty());
    assert_eq!(sandboxes.backend().backend_name(), "docker");
}
