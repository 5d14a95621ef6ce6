//! The binary over stdin/stdout, as an editor would start it.

use std::process::Stdio;

use boitata_acp::{run_prompt, Prompt, StopReason};
use tokio_util::sync::CancellationToken;

use super::support::{Scenario, PATIENCE};
use super::tcp::list_then_answer;

#[tokio::test]
async fn a_full_turn_over_stdio_then_eof_exits_0() {
    let scenario = Scenario::new(list_then_answer());
    let mut command = scenario.command(&["--stdio"]);
    // No secret: over stdio the client is the process that started the agent.
    command.env_remove("BOITATA_AGENT_SECRET");
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdio = tokio::io::join(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let mut seen = 0u64;
    let result = run_prompt(
        stdio,
        Prompt::new("what is in the workspace?", scenario.workspace()),
        |_| seen += 1,
        CancellationToken::new(),
    )
    .await;
    // run_prompt closed the agent's stdin: it exits on its own.
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("boitata-agent --stdio did not exit after stdin closed")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let outcome = result.unwrap_or_else(|e| panic!("{e}; agent stderr:\n{stderr}"));
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(
        outcome.final_message,
        "done: the workspace has README.md and hello.txt"
    );
    assert!(seen >= 4, "only {seen} events");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}
