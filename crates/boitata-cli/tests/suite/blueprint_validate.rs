//! `boitata blueprint validate` and `boitata blueprint graph` through the built binary.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn boitata(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("boitata").unwrap();
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("BOITATA_DATA_DIR", home.join("data"));
    cmd
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/blueprints")
}

#[test]
fn the_example_blueprints_validate_with_exit_0() {
    let home = tempfile::tempdir().unwrap();
    let output = boitata(home.path())
        .args(["blueprint", "validate"])
        .arg(examples().join("test_fix_loop.yaml"))
        .arg(examples().join("containerized_task.yaml"))
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("test_fix_loop.yaml: ok"), "{stdout}");
    assert!(stdout.contains("containerized_task.yaml: ok"), "{stdout}");
}

#[test]
fn an_invalid_blueprint_exits_1_with_located_diagnostics_on_stderr() {
    let home = tempfile::tempdir().unwrap();
    let bad = home.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "name: bad\nentry: box\nnodes:\n  box: { type: exec, command: \"true\" }\nedges:\n  - { from: tset, to: box }\n  - { from: box, when: sucess, to: END }\n",
    )
    .unwrap();
    let output = boitata(home.path())
        .args(["blueprint", "validate"])
        .arg(&bad)
        .arg(examples().join("test_fix_loop.yaml"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Both problems at once, each with file:line:col and the source line.
    assert!(
        stderr.contains(&format!("[{}:6:13]", bad.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("edge from \"tset\": no such node (nodes: box)"),
        "{stderr}"
    );
    assert!(stderr.contains("  - { from: tset, to: box }"), "{stderr}");
    assert!(
        stderr.contains(&format!("[{}:7:24]", bad.display())),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean \"success\"?"), "{stderr}");
    assert!(stderr.contains("invalid blueprint (2 errors)"), "{stderr}");
    // The valid file is still checked and reported.
    assert!(String::from_utf8_lossy(&output.stdout).contains("test_fix_loop.yaml: ok"));
}

#[test]
fn a_missing_file_is_invalid() {
    let home = tempfile::tempdir().unwrap();
    let output = boitata(home.path())
        .args(["blueprint", "validate", "does-not-exist.yaml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("cannot read blueprint does-not-exist.yaml"));
}

#[test]
fn graph_prints_a_mermaid_flowchart() {
    let home = tempfile::tempdir().unwrap();
    let output = boitata(home.path())
        .args(["blueprint", "graph"])
        .arg(examples().join("test_fix_loop.yaml"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "flowchart TD\n    start((start))\n    n0[\"test: exec\"]\n    n1[\"fix: agent\"]\n    finish([\"END\"])\n    start --> n0\n    n0 -->|success| finish\n    n0 -->|failure| n1\n    n1 --> n0\n"
    );
}

#[test]
fn the_summary_counts_in_the_singular_and_the_plural() {
    let home = tempfile::tempdir().unwrap();
    let one = home.path().join("one.yaml");
    std::fs::write(
        &one,
        "name: one\nentry: a\nnodes:\n  a: { type: exec, command: \"true\" }\nedges:\n  - { from: a, to: END }\n",
    )
    .unwrap();
    let output = boitata(home.path())
        .args(["blueprint", "validate"])
        .arg(&one)
        .arg(examples().join("test_fix_loop.yaml"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("one.yaml: ok (blueprint one, 1 node, 1 edge)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("test_fix_loop.yaml: ok (blueprint test_fix_loop, 2 nodes, 3 edges)\n"),
        "{stdout}"
    );
}
