//! Inside the sandbox too, a tool result reaches the model only through the run's
//! redactor: the agent's settings, its run secret and the credential shapes.

use boitata_acp::{run_prompt_at, Prompt, StopReason};
use tokio_util::sync::CancellationToken;

use super::support::{FakeTurn, Seen, TestAgent};

const SECRET: &str = "the-run-secret-0123456789";

#[tokio::test]
async fn a_tool_result_reaches_the_model_redacted() {
    let agent = TestAgent::start(
        vec![
            FakeTurn::Reply(
                "reading",
                vec![("file_read", serde_json::json!({"path": "creds.txt"}))],
            ),
            FakeTurn::Reply("done", vec![]),
        ],
        Some(SECRET),
    )
    .await;
    let token = format!("glpat-{}", "x1Y2z3".repeat(4));
    std::fs::write(
        agent.root().join("creds.txt"),
        format!("secret={SECRET}\nurl=https://ci:{token}@example.invalid/r.git\n"),
    )
    .unwrap();
    let seen = Seen::default();
    let outcome = run_prompt_at(
        agent.addr,
        Prompt::new("read the creds", agent.root()).secret(SECRET),
        seen.callback(),
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);

    let requests = agent.provider.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let tool_result = requests[1].to_string();
    assert!(tool_result.contains("secret=[REDACTED]"), "{tool_result}");
    assert!(
        tool_result.contains("https://ci:[REDACTED]@example.invalid/r.git"),
        "{tool_result}"
    );
    let events: String = seen.events().iter().map(|e| e.to_json_line()).collect();
    for leaked in [SECRET, token.as_str()] {
        assert!(!tool_result.contains(leaked), "{tool_result}");
        assert!(!events.contains(leaked), "{events}");
    }
}
