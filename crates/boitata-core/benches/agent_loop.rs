//! The agent loop's own cost per tool call.
//!
//! Replays a scripted session of N turns (default 1,000), each one `file_read` of a
//! small file, and reports microseconds per tool call: through the whole loop with the
//! SQLite run store recording every event (as `boitata run` does), through the loop
//! with no store, through the tool alone (`Toolbox::call`), and the raw
//! `std::fs::read_to_string` of the same file. Run with `scripts/bench-agent-loop.sh`
//! or `cargo bench -p boitata-core --bench agent_loop`; `BENCH_CALLS=N` sets N.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use boitata_core::agent::{Agent, AgentSettings, AgentStop};
use boitata_core::store::{recorder, NewRun, RunStore, SqliteStore};
use boitata_core::{Emitter, Redactor};
use boitata_provider::scripted::{Script, ScriptToolCall, ScriptTurn, Scripted};
use boitata_tools::tool::{ToolContext, ToolLimits, Toolbox};
use boitata_tools::workspace::Workspace;
use tokio_util::sync::CancellationToken;

fn script(calls: usize) -> Script {
    let mut turns: Vec<ScriptTurn> = (0..calls)
        .map(|_| ScriptTurn {
            text: String::new(),
            tool_calls: vec![ScriptToolCall {
                name: "file_read".into(),
                arguments: serde_json::json!({ "path": "small.txt" }),
            }],
        })
        .collect();
    turns.push(ScriptTurn {
        text: "done".into(),
        tool_calls: Vec::new(),
    });
    Script {
        description: None,
        turns,
    }
}

async fn loop_once(
    calls: usize,
    workspace: &Workspace,
    store: Option<Arc<dyn RunStore>>,
) -> Duration {
    let agent = Agent::new(
        Arc::new(Scripted::new(script(calls))),
        Toolbox::standard(),
        AgentSettings {
            max_turns: calls as u32 + 1,
            ..AgentSettings::default()
        },
        BTreeMap::new(),
    );
    let run_id = match &store {
        Some(s) => s.create_run(&NewRun::default()).unwrap().id,
        None => "bench".to_owned(),
    };
    let recorder = store.as_ref().map(recorder);
    let emitter = Emitter::new(run_id, recorder, Redactor::default());
    let cancel = CancellationToken::new();
    let start = Instant::now();
    let outcome = agent
        .run("bench", workspace, &emitter, None, &cancel)
        .await
        .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(outcome.stop, AgentStop::EndTurn);
    elapsed
}

fn per_call_us(d: Duration, calls: usize) -> f64 {
    d.as_secs_f64() * 1e6 / calls as f64
}

fn main() {
    let calls: usize = std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("small.txt");
    std::fs::write(&file, "hello from a small file\n".repeat(20)).unwrap();
    let workspace = Workspace::open(dir.path()).unwrap();
    let data = tempfile::tempdir().unwrap();
    let store: Arc<dyn RunStore> =
        Arc::new(SqliteStore::open(data.path(), Redactor::default()).unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();

    // Warm up once (page cache, SQLite schema, allocator).
    rt.block_on(loop_once(50, &workspace, Some(store.clone())));

    let with_store = rt.block_on(loop_once(calls, &workspace, Some(store)));
    let without_store = rt.block_on(loop_once(calls, &workspace, None));

    let ctx = ToolContext {
        workspace,
        cancel: CancellationToken::new(),
        command_env: BTreeMap::new(),
        limits: ToolLimits::default(),
    };
    let toolbox = Toolbox::standard();
    let args = serde_json::json!({ "path": "small.txt" });
    let tool_only = rt.block_on(async {
        let start = Instant::now();
        for _ in 0..calls {
            toolbox.call(&ctx, "file_read", args.clone()).await.unwrap();
        }
        start.elapsed()
    });

    let start = Instant::now();
    for _ in 0..calls {
        std::hint::black_box(std::fs::read_to_string(&file).unwrap());
    }
    let raw = start.elapsed();

    let raw_us = per_call_us(raw, calls);
    println!("agent loop overhead, {calls} file_read tool calls (scripted provider)");
    println!("{:<44} {:>12} {:>10}", "", "µs/call", "× raw");
    for (name, d) in [
        ("loop + SQLite run store (as `boitata run`)", with_store),
        ("loop, no store", without_store),
        ("file_read tool alone (Toolbox::call)", tool_only),
        ("raw std::fs::read_to_string", raw),
    ] {
        let us = per_call_us(d, calls);
        println!("{name:<44} {us:>12.1} {:>10.1}", us / raw_us);
    }
    println!(
        "loop's own cost per call (no store − tool alone): {:.1} µs; store's cost per call: {:.1} µs",
        per_call_us(without_store, calls) - per_call_us(tool_only, calls),
        per_call_us(with_store, calls) - per_call_us(without_store, calls),
    );
}
