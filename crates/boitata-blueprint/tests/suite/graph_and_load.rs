//! Mermaid output and finding blueprint files.

use std::path::PathBuf;

use boitata_blueprint::{find, graph, load, FindError, LoadError};

use super::support::blueprint;

#[test]
fn the_graph_is_a_mermaid_flowchart_with_when_labels() {
    let bp = blueprint(
        r#"name: graph
entry: test
nodes:
  test: { type: exec, command: "make test" }
  fix: { type: agent, prompt: "fix \"it\"" }
edges:
  - { from: test, when: success, to: END }
  - { from: test, when: 3, to: fix }
  - { from: test, when: failure, to: fix }
  - { from: fix, to: test }
"#,
    );
    assert_eq!(
        graph::mermaid(&bp),
        r#"flowchart TD
    start((start))
    n0["test: exec"]
    n1["fix: agent"]
    finish(["END"])
    start --> n0
    n0 -->|success| finish
    n0 -->|3| n1
    n0 -->|failure| n1
    n1 --> n0
"#
    );
}

#[test]
fn names_are_found_in_the_search_dirs_in_order() {
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    std::fs::write(second.path().join("fix.yaml"), "x").unwrap();
    std::fs::write(second.path().join("other.yml"), "x").unwrap();
    let dirs: Vec<PathBuf> = vec![first.path().into(), second.path().into()];
    assert_eq!(find("fix", &dirs).unwrap(), second.path().join("fix.yaml"));
    assert_eq!(
        find("other", &dirs).unwrap(),
        second.path().join("other.yml")
    );
    std::fs::write(first.path().join("fix.yaml"), "x").unwrap();
    assert_eq!(find("fix", &dirs).unwrap(), first.path().join("fix.yaml"));

    let err = find("missing", &dirs).unwrap_err();
    assert!(matches!(err, FindError::NotFound { .. }));
    assert!(
        err.to_string().contains("no blueprint named \"missing\""),
        "{err}"
    );
    // A path is never looked up by name.
    let err = find("nope/fix.yaml", &dirs).unwrap_err();
    assert_eq!(err, FindError::NoFile("nope/fix.yaml".into()));
    let path = second.path().join("fix.yaml");
    assert_eq!(find(path.to_str().unwrap(), &[]).unwrap(), path);
}

#[test]
fn loading_reports_diagnostics_with_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "name: bad\nentry: a\nnodes:\n  a: { type: exec }\n").unwrap();
    let Err(LoadError::Invalid(d)) = load(&path) else {
        panic!("expected diagnostics")
    };
    let text = d.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:4:3: node \"a\": missing field \"command\"",
            path.display()
        )),
        "{text}"
    );
    let err = load(&dir.path().join("absent.yaml")).unwrap_err();
    assert!(
        err.to_string().starts_with("cannot read blueprint"),
        "{err}"
    );
}

#[test]
fn a_device_is_refused_as_not_a_regular_file_without_reading_it() {
    // `/dev/zero` reports a size of 0 and never ends: it must be refused, not read.
    let err = load(std::path::Path::new("/dev/zero")).unwrap_err();
    assert!(
        matches!(err, LoadError::NotRegularFile { .. }),
        "expected NotRegularFile, got {err}"
    );
    assert_eq!(
        err.to_string(),
        "cannot read blueprint /dev/zero: not a regular file (it is a character device); pass a .yaml file"
    );
    // `run --blueprint /dev/zero` must reach that message, not "no blueprint file".
    assert_eq!(find("/dev/zero", &[]).unwrap(), PathBuf::from("/dev/zero"));
}

#[test]
fn a_fifo_is_refused_promptly_without_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("blueprint.yaml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // Run on a thread so that a regression (an open that blocks for a writer) fails
    // the test instead of hanging the suite.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(load(&fifo).map(|_| ()).map_err(|e| e.to_string()));
    });
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("loading a FIFO blocked");
    let err = result.unwrap_err();
    assert!(err.contains("not a regular file (it is a FIFO)"), "{err}");
}

#[test]
fn the_size_limit_is_enforced_on_the_bytes_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.yaml");
    std::fs::write(
        &path,
        "x".repeat(boitata_blueprint::MAX_BLUEPRINT_BYTES + 1),
    )
    .unwrap();
    let err = load(&path).unwrap_err();
    assert!(matches!(err, LoadError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("limited to"), "{err}");
}
