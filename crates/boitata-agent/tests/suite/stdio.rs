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

/// `boitata-agent --stdio` as an editor starts it with a trimmed environment: the
/// OpenAI provider, no key.
fn without_a_key(scenario: &Scenario) -> tokio::process::Command {
    let mut command = scenario.command(&["--stdio"]);
    command
        .env_remove("BOITATA_AGENT_SECRET")
        .env_remove("OPENAI_API_KEY")
        .env_remove("BOITATA_SCRIPT")
        .env("BOITATA_PROVIDER", "openai")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

#[tokio::test]
async fn without_a_key_it_answers_initialize_and_refuses_sessions_saying_what_is_missing() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let scenario = Scenario::new(serde_json::json!({"turns": []}));
    let mut child = without_a_key(&scenario).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = async |line: &[u8]| {
        stdin.write_all(line).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        let reply = tokio::time::timeout(PATIENCE, stdout.next_line())
            .await
            .expect("no reply in time")
            .unwrap()
            .expect("the agent closed stdout");
        serde_json::from_str::<serde_json::Value>(&reply).unwrap()
    };
    let init = ask(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#.as_bytes()).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let cwd = serde_json::to_string(&scenario.workspace()).unwrap();
    let session = ask(format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"session/new","params":{{"cwd":{cwd},"mcpServers":[]}}}}"#
    ).as_bytes())
    .await;
    assert_eq!(session["error"]["code"], -32000, "{session}");
    let message = session["error"]["message"].as_str().unwrap();
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
    let prompt = ask(r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"x","prompt":[{"type":"text","text":"hi"}]}}"#.as_bytes()).await;
    assert_eq!(prompt["error"]["code"], -32000, "{prompt}");
    // A line that is not UTF-8 gets a parse error; the agent keeps serving.
    let bad = ask(b"\xff").await;
    assert_eq!(bad["error"]["code"], -32700, "{bad}");
    let again = ask(r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#.as_bytes()).await;
    assert_eq!(again["id"], 4, "{again}");

    // It is still running, and exits 0 once the client goes away.
    assert!(child.try_wait().unwrap().is_none());
    drop(stdin);
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("the agent did not exit after stdin closed")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}
