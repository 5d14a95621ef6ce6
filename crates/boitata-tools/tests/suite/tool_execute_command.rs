//! `execute_command`: timeouts and cancellation kill the whole process group, output is
//! capped with a count, stdin is closed, and the environment is exactly the one given.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use boitata_tools::tool::ToolError;
use serde_json::json;

use super::tool_support::{inside, live_group_members, number_after, Fixture};

/// Longest any of these calls may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group_and_returns() {
    let fx = Fixture::new();
    let call = fx.call(
        "execute_command",
        json!({
            "command": "echo pgid=$$; sleep 1000 & echo started; sleep 1000",
            "timeout_secs": 1
        }),
    );
    // The background sleep keeps the output pipe open: the call must still return.
    let result = tokio::time::timeout(HANG, call).await.expect("hung");
    let Err(ToolError::Failed(message)) = result else {
        panic!("expected a timeout failure, got {result:?}");
    };
    assert!(message.contains("timed out after 1s"), "{message}");
    assert!(message.contains("started"), "{message}");
    let pgid = number_after(&message, "pgid=");
    assert_eq!(
        live_group_members(pgid),
        vec![],
        "survivors in group {pgid}"
    );
}

#[tokio::test]
async fn background_processes_are_stopped_when_the_command_exits() {
    let fx = Fixture::new();
    let call = fx.call(
        "execute_command",
        json!({"command": "sleep 1000 & echo pgid=$$"}),
    );
    let out = tokio::time::timeout(HANG, call)
        .await
        .expect("hung")
        .unwrap();
    assert!(out.ends_with("[exit code: 0]"), "{out}");
    assert!(
        out.contains("left running in the background were stopped"),
        "{out}"
    );
    let pgid = number_after(&out, "pgid=");
    assert_eq!(
        live_group_members(pgid),
        vec![],
        "survivors in group {pgid}"
    );
}

#[tokio::test]
async fn cancellation_kills_the_group_promptly() {
    let fx = Fixture::new();
    let toolbox = fx.toolbox.clone();
    let ctx = fx.ctx.clone();
    let call = tokio::spawn(async move {
        toolbox
            .call(
                &ctx,
                "execute_command",
                json!({"command": "echo $$ > pgid.txt; sleep 1000 & sleep 1000"}),
            )
            .await
    });
    let pgid_file = inside(&fx, "pgid.txt");
    let pgid = wait_for_number(&pgid_file).await;
    assert!(!live_group_members(pgid).is_empty(), "command not running");

    fx.ctx.cancel.cancel();
    let result = tokio::time::timeout(HANG, call)
        .await
        .expect("hung after cancel")
        .unwrap();
    assert!(matches!(result, Err(ToolError::Cancelled)), "{result:?}");
    assert_eq!(
        live_group_members(pgid),
        vec![],
        "survivors in group {pgid}"
    );
}

async fn wait_for_number(path: &Path) -> i32 {
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(n) = text.trim().parse() {
                return n;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} never appeared", path.display());
}

#[tokio::test]
async fn output_beyond_the_cap_is_cut_with_the_count_of_cut_bytes() {
    let mut fx = Fixture::new();
    fx.ctx.limits.max_output_bytes = 1000;
    // 6 + 20000 * 2 + 4 = 40010 bytes of output.
    let out = fx
        .call(
            "execute_command",
            json!({"command": "echo START; yes x | head -n 20000; echo END"}),
        )
        .await
        .unwrap();
    let expected_cut = 40010 - 1000;
    assert!(
        out.contains(&format!("[... {expected_cut} bytes cut ...]")),
        "{}",
        &out[..out.len().min(2000)]
    );
    assert!(out.starts_with("START\n"), "the start is kept");
    assert!(out.contains("x\nEND\n"), "the end is kept");
    assert!(out.ends_with("[exit code: 0]"));
    assert!(out.len() < 1000 + 200, "{} bytes returned", out.len());
}

#[tokio::test]
async fn stdin_is_empty_so_cat_and_read_return_at_once() {
    // The test process's own stdin is usually /dev/null already, which would hide a
    // command inheriting it. So run the check in a copy of this test binary whose stdin
    // is a pipe that never ends, as a terminal would be: a command that inherited it
    // would wait until its timeout and the check would fail.
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "suite::tool_execute_command::stdin_check_in_a_process_with_endless_stdin",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let endless_stdin = child.stdin.take();
    let output = tokio::time::timeout(HANG, child.wait_with_output())
        .await
        .expect("hung")
        .unwrap();
    drop(endless_stdin);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Run by `stdin_is_empty_so_cat_and_read_return_at_once` in a child process.
#[tokio::test]
#[ignore = "run by stdin_is_empty_so_cat_and_read_return_at_once with an endless stdin"]
async fn stdin_check_in_a_process_with_endless_stdin() {
    let fx = Fixture::new();
    let out = fx
        .call(
            "execute_command",
            json!({"command": "cat; read line; echo read=$?", "timeout_secs": 20}),
        )
        .await
        .unwrap();
    assert_eq!(out, "read=1\n[exit code: 0]");
}

#[tokio::test]
async fn commands_get_exactly_the_given_environment() {
    let mut fx = Fixture::new();
    let mut env = BTreeMap::new();
    env.insert("PATH".to_owned(), std::env::var("PATH").unwrap());
    env.insert("BOITATA_PROBE".to_owned(), "visible".to_owned());
    fx.ctx.command_env = env.clone();
    let out = fx
        .call("execute_command", json!({"command": "env"}))
        .await
        .unwrap();
    assert!(out.contains("BOITATA_PROBE=visible\n"), "{out}");

    // Variables the shell sets for itself.
    let shell_own = ["PWD", "OLDPWD", "SHLVL", "_"];
    let mut checked = 0;
    for (name, _) in std::env::vars() {
        if env.contains_key(&name) || shell_own.contains(&name.as_str()) {
            continue;
        }
        checked += 1;
        assert!(
            !out.lines()
                .any(|line| line.starts_with(&format!("{name}="))),
            "{name} leaked from the agent's environment into the command: {out}"
        );
    }
    assert!(checked > 0, "the test process has no variable to leak");
}

#[tokio::test]
async fn the_command_leads_its_own_session_and_process_group() {
    let fx = Fixture::new();
    let out = fx
        .call(
            "execute_command",
            json!({"command": "echo pid=$$; cut -d' ' -f5,6 /proc/$$/stat | sed 's/^/pgid=/; s/ / sid=/'"}),
        )
        .await
        .unwrap();
    let pid = number_after(&out, "pid=");
    assert_eq!(number_after(&out, "pgid="), pid, "{out}");
    if Path::new("/usr/bin/setsid").exists() || Path::new("/bin/setsid").exists() {
        assert_eq!(number_after(&out, "sid="), pid, "{out}");
    }
}

#[tokio::test]
async fn it_runs_in_the_workspace_root_and_reports_the_exit_code() {
    let fx = Fixture::new();
    let out = fx
        .call("execute_command", json!({"command": "pwd; exit 3"}))
        .await
        .unwrap();
    assert_eq!(out, format!("{}\n[exit code: 3]", fx.root.display()));
}

#[tokio::test]
async fn stdout_and_stderr_are_interleaved_in_order() {
    let fx = Fixture::new();
    let out = fx
        .call(
            "execute_command",
            json!({"command": "echo one; echo two >&2; echo three"}),
        )
        .await
        .unwrap();
    assert_eq!(out, "one\ntwo\nthree\n[exit code: 0]");
}

#[tokio::test]
async fn a_timeout_above_the_configured_maximum_is_lowered_to_it() {
    let mut fx = Fixture::new();
    fx.ctx.limits.command_timeout = Duration::from_secs(1);
    let call = fx.call(
        "execute_command",
        json!({"command": "sleep 1000", "timeout_secs": 100}),
    );
    let result = tokio::time::timeout(HANG, call).await.expect("hung");
    let Err(ToolError::Failed(message)) = result else {
        panic!("expected a timeout, got {result:?}");
    };
    assert!(message.contains("timed out after 1s"), "{message}");
}
