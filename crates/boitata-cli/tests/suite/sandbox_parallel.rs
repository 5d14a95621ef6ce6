//! Ten `boitata run` processes at once, each with its own sandbox.

use boitata_core::RunStatus;
use boitata_test_support::docker::RunScope;

use super::sandbox_support::{daemon, events, sandbox_events, Home};

#[test]
fn ten_parallel_sandboxed_runs_all_succeed_and_leave_no_container() {
    let Some(_daemon) = daemon("cli_sandbox_parallel") else {
        return;
    };
    let home = Home::new();
    let file = home.blueprint(
        "par",
        r#"name: par
entry: box
nodes:
  box: { type: provision, image: "boitata-base:bookworm", memory: 256m, cpus: 0.5 }
  work: { type: exec, container: "{box}", command: "echo $BOITATA_RUN_ID > /workspace/id && cat /workspace/id" }
edges:
  - { from: box, to: work }
"#,
    );
    let children: Vec<_> = (0..10)
        .map(|i| {
            let mut cmd = home.boitata();
            cmd.args(["run", &format!("run {i}"), "--json", "--blueprint"])
                .arg(&file);
            std::thread::spawn(move || cmd.output().unwrap())
        })
        .collect();
    let outputs: Vec<_> = children.into_iter().map(|c| c.join().unwrap()).collect();
    let mut scopes = Vec::new();
    let mut sandboxes = Vec::new();
    for output in &outputs {
        let events = events(&output.stdout);
        let run_id = events.first().expect("no events").run_id.clone();
        scopes.push(RunScope::adopt(run_id.clone()));
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(matches!(
            events.last().unwrap().payload,
            boitata_core::EventPayload::RunFinished {
                status: RunStatus::Succeeded,
                ..
            }
        ));
        let (made, destroyed) = sandbox_events(&events);
        assert_eq!(made.len(), 1);
        assert_eq!(made, destroyed);
        sandboxes.extend(made);
        // Each run saw its own id inside its own sandbox.
        let printed: String = events
            .iter()
            .filter_map(|e| match &e.payload {
                boitata_core::EventPayload::ExecOutput { chunk, .. } => Some(chunk.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(printed.trim(), run_id);
    }
    sandboxes.sort();
    sandboxes.dedup();
    assert_eq!(sandboxes.len(), 10, "ten distinct sandboxes");
    for scope in &scopes {
        assert_eq!(
            scope.containers(),
            Vec::<String>::new(),
            "run {}",
            scope.run_id()
        );
    }
}
