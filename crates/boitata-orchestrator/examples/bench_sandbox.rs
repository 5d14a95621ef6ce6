//! Times sandbox cycles through Boitata's Docker backend: provision → exec `true` →
//! destroy, `--cycles N` times (after one warm-up cycle that also connects), and prints
//! one line per cycle: `boitata MILLISECONDS`. Used by `scripts/bench-sandbox.sh`.
//!
//! ```sh
//! cargo run --release -p boitata-orchestrator --example bench_sandbox -- --cycles 20 --image boitata-base:bookworm
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Instant;

use boitata_orchestrator::{DiscardOutput, DockerBackend, ExecSpec, Sandbox, SandboxSpec};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut cycles: usize = 20;
    let mut image = "boitata-base:bookworm".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--cycles", Some(n)) => match n.parse() {
                Ok(n) => cycles = n,
                Err(_) => return usage(&format!("--cycles {n}: not a number")),
            },
            ("--image", Some(i)) => image = i,
            _ => return usage(&format!("unexpected argument {arg:?}")),
        }
    }
    let backend = DockerBackend::from_env();
    let run_id = format!("bench-{}", std::process::id());
    for cycle in 0..=cycles {
        let started = Instant::now();
        if let Err(e) = one_cycle(&backend, &image, &run_id).await {
            eprintln!("bench_sandbox: cycle {cycle}: {e}");
            return ExitCode::FAILURE;
        }
        if cycle > 0 {
            println!("boitata {:.3}", started.elapsed().as_secs_f64() * 1e3);
        }
    }
    ExitCode::SUCCESS
}

async fn one_cycle(
    backend: &DockerBackend,
    image: &str,
    run_id: &str,
) -> Result<(), boitata_orchestrator::SandboxError> {
    let t0 = Instant::now();
    let id = backend
        .provision(&SandboxSpec::new(image, run_id).node("bench"))
        .await?;
    let t1 = Instant::now();
    let status = backend
        .exec(&id, &ExecSpec::new(["true"]), &mut DiscardOutput)
        .await;
    let t2 = Instant::now();
    let destroyed = backend.destroy(&id).await;
    if std::env::var_os("BENCH_PHASES").is_some() {
        eprintln!(
            "phases: provision {:.1} ms, exec {:.1} ms, destroy {:.1} ms",
            (t1 - t0).as_secs_f64() * 1e3,
            (t2 - t1).as_secs_f64() * 1e3,
            t2.elapsed().as_secs_f64() * 1e3
        );
    }
    let status = status?;
    destroyed?;
    if status.code() != Some(0) {
        return Err(boitata_orchestrator::SandboxError::InvalidSpec {
            message: format!("`true` ended with {status:?}"),
        });
    }
    Ok(())
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("bench_sandbox: {problem}\nusage: bench_sandbox [--cycles N] [--image IMAGE]");
    ExitCode::from(2)
}
