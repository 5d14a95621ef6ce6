use std::collections::BTreeMap;

use boitata_orchestrator::reaper::{self, owner_process_alive};
use boitata_orchestrator::sandbox::LABEL_RUN_ID;
use boitata_orchestrator::Sandbox;
use boitata_test_support::docker::RunScope;

use super::{base_spec, provision, setup};

#[tokio::test]
async fn gc_removes_sandboxes_of_runs_that_are_not_live() {
    let Some((daemon, dead, backend)) = setup("gc_dead") else {
        return;
    };
    let live = daemon.run_scope("gc_live");
    let d1 = provision(&backend, &base_spec(&dead)).await;
    let d2 = provision(&backend, &base_spec(&dead)).await;
    let l1 = provision(&backend, &base_spec(&live)).await;

    let listed = backend
        .list(&BTreeMap::from([(
            LABEL_RUN_ID.to_owned(),
            dead.run_id().to_owned(),
        )]))
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    let info = &listed[0];
    assert_eq!(info.run_id(), Some(dead.run_id()));
    assert_eq!(info.node(), Some("test"));
    assert_eq!(info.pid(), Some(std::process::id()));
    assert_eq!(info.state, "running");
    assert_eq!(info.image, boitata_test_support::docker::BASE_IMAGE);
    assert!(info.name.starts_with("boitata-test-"), "{}", info.name);
    assert_eq!(owner_process_alive(info), Some(true));

    // Other tests run beside this one on the same daemon: only this test's two runs
    // are judged; everything else counts as live.
    let report = reaper::gc_where(&backend, |info| info.run_id() != Some(dead.run_id()))
        .await
        .unwrap();
    let mut removed: Vec<_> = report.removed.iter().map(|i| i.id.clone()).collect();
    removed.sort();
    let mut expected = vec![d1, d2];
    expected.sort();
    assert_eq!(removed, expected);
    assert!(report.failed.is_empty());
    assert!(report.kept.iter().any(|i| i.id == l1));
    assert!(dead.containers().is_empty());
    assert_eq!(live.containers(), vec![l1.to_string()]);
    drop(RunScope::adopt(live.run_id()));
}
