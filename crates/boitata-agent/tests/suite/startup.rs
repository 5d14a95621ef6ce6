//! What the binary refuses before it serves anything: one clear line, exit 2.

use std::process::Stdio;

use super::support::{Scenario, PATIENCE};

async fn run_to_exit(mut command: tokio::process::Command) -> (Option<i32>, String) {
    let output = tokio::time::timeout(
        PATIENCE,
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output(),
    )
    .await
    .expect("boitata-agent did not exit")
    .unwrap();
    assert!(
        output.stdout.is_empty(),
        "nothing may be printed on stdout: {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn one_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "expected one line on stderr, got:\n{stderr}"
    );
    lines[0]
}

#[tokio::test]
async fn tcp_without_a_secret_refuses_to_start() {
    let scenario = Scenario::new(serde_json::json!({"turns": []}));
    let mut command = scenario.command(&["--addr", "127.0.0.1:0"]);
    command.env_remove("BOITATA_AGENT_SECRET");
    let (code, stderr) = run_to_exit(command).await;
    assert_eq!(code, Some(2), "{stderr}");
    let line = one_line(&stderr);
    assert!(line.contains("BOITATA_AGENT_SECRET is not set"), "{line}");
    assert!(line.contains("--insecure-no-secret"), "{line}");
}

#[tokio::test]
async fn a_missing_api_key_is_one_line_naming_the_variable_and_exit_2() {
    let scenario = Scenario::new(serde_json::json!({"turns": []}));
    let mut command = scenario.command(&["--addr", "127.0.0.1:0"]);
    command
        .env("BOITATA_PROVIDER", "openai")
        .env_remove("OPENAI_API_KEY");
    let (code, stderr) = run_to_exit(command).await;
    assert_eq!(code, Some(2), "{stderr}");
    let line = one_line(&stderr);
    assert!(line.contains("OPENAI_API_KEY"), "{line}");
}

#[tokio::test]
async fn a_workspace_that_does_not_exist_is_exit_2() {
    let scenario = Scenario::new(serde_json::json!({"turns": []}));
    let mut command = tokio::process::Command::new(super::support::agent_bin());
    command
        .args(["--stdio", "--workspace", "/no/such/workspace", "--config"])
        .arg(scenario.config())
        .env_clear()
        .envs(scenario.env());
    let (code, stderr) = run_to_exit(command).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(one_line(&stderr).contains("/no/such/workspace"), "{stderr}");
}

#[tokio::test]
async fn addr_and_stdio_together_are_a_usage_error() {
    let scenario = Scenario::new(serde_json::json!({"turns": []}));
    let (code, stderr) = run_to_exit(scenario.command(&["--stdio", "--addr", "127.0.0.1:0"])).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}
