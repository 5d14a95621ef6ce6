//! Without a Docker daemon: host-only blueprints run; sandbox blueprints and
//! `boitata sandbox` commands stop with one clear line and exit 2.

use super::sandbox_support::Home;

const MISSING: &str = "unix:///nonexistent/boitata-cli-test/docker.sock";

#[test]
fn with_docker_host_at_a_missing_socket_host_blueprints_run_and_sandbox_ones_exit_2() {
    let home = Home::new();
    let host = home.blueprint(
        "host_only",
        "name: host_only\nentry: hi\nnodes:\n  hi: { type: exec, command: \"echo on the host\" }\n",
    );
    let output = home
        .boitata()
        .env("DOCKER_HOST", MISSING)
        .args(["run", "t", "--blueprint"])
        .arg(&host)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "on the host\n");

    let sandboxed = home.blueprint(
        "sandboxed",
        "name: sandboxed\nentry: box\nnodes:\n  box: { type: provision, image: \"boitata-base:bookworm\" }\n",
    );
    let output = home
        .boitata()
        .env("DOCKER_HOST", MISSING)
        .args(["run", "t", "--blueprint"])
        .arg(&sandboxed)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("error: cannot reach the Docker daemon at "),
        "{stderr}"
    );
    assert!(lines[0].contains(MISSING), "{stderr}");
    assert!(lines[0].contains("DOCKER_HOST"), "{stderr}");
    assert!(output.stdout.is_empty());

    // Refused before a run was recorded.
    let runs = home
        .boitata()
        .args(["runs", "list", "--json"])
        .output()
        .unwrap();
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&runs.stdout).unwrap();
    assert_eq!(runs.len(), 1, "only the host run: {runs:#?}");

    for args in [["sandbox", "gc"], ["sandbox", "list"]] {
        let output = home
            .boitata()
            .env("DOCKER_HOST", MISSING)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(MISSING), "{stderr}");
    }
}
