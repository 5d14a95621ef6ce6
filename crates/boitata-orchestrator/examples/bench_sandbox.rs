//! Times sandbox cycles through Boitata: provision → exec `true` → destroy, `--cycles N`
//! times (after one warm-up cycle that also connects), and prints one line per cycle:
//! `boitata MILLISECONDS`. Used by `scripts/bench-sandbox.sh` and
//! `scripts/bench-network.sh`.
//!
//! - `--network bridge` (the default here): through the Docker backend alone, on
//!   Docker's bridge;
//! - `--network run`: a whole run's cycle through `RunSandboxes`, on the run's own
//!   network: each cycle is a new run, so it makes the network and its host rules,
//!   provisions, execs, and tears down (sandbox, rules, network);
//! - `--network run-bridge`: the same run cycle through `RunSandboxes` on the bridge,
//!   to compare with `run`.
//!
//! ```sh
//! cargo run --release -p boitata-orchestrator --example bench_sandbox -- --cycles 20 --image boitata-base:bookworm
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Instant;

use std::sync::Arc;

use boitata_core::{Emitter, Redactor};
use boitata_orchestrator::{
    DiscardOutput, DockerBackend, ExecSpec, Network, RunSandboxes, Sandbox, SandboxSpec,
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut cycles: usize = 20;
    let mut image = "boitata-base:bookworm".to_owned();
    let mut network = "bridge".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--cycles", Some(n)) => match n.parse() {
                Ok(n) => cycles = n,
                Err(_) => return usage(&format!("--cycles {n}: not a number")),
            },
            ("--image", Some(i)) => image = i,
            ("--network", Some(n)) if ["bridge", "run", "run-bridge"].contains(&n.as_str()) => {
                network = n
            }
            _ => return usage(&format!("unexpected argument {arg:?}")),
        }
    }
    let backend = Arc::new(DockerBackend::from_env());
    let run_id = format!("bench-{}", std::process::id());
    for cycle in 0..=cycles {
        let started = Instant::now();
        let done = match network.as_str() {
            "bridge" => one_cycle(&backend, &image, &run_id).await,
            "run" => run_cycle(&backend, &image, &format!("{run_id}-{cycle}"), Network::Run).await,
            _ => {
                run_cycle(
                    &backend,
                    &image,
                    &format!("{run_id}-{cycle}"),
                    Network::Bridge,
                )
                .await
            }
        };
        if let Err(e) = done {
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
        .provision(
            &SandboxSpec::new(image, run_id)
                .node("bench")
                .network(Network::Bridge),
        )
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

/// One run's cycle through `RunSandboxes`: (network,) provision, exec, teardown.
async fn run_cycle(
    backend: &Arc<DockerBackend>,
    image: &str,
    run_id: &str,
    network: Network,
) -> Result<(), boitata_orchestrator::SandboxError> {
    let run = RunSandboxes::new(
        backend.clone(),
        Emitter::new(run_id, None, Redactor::default()),
    );
    let t0 = Instant::now();
    if network == Network::Run {
        run.ensure_run_network().await?;
    }
    let t1 = Instant::now();
    let made = run
        .provision(
            Some("bench"),
            SandboxSpec::new(image, run_id).network(network),
        )
        .await;
    let t2 = Instant::now();
    let status = match &made {
        Ok(id) => Some(
            backend
                .exec(id, &ExecSpec::new(["true"]), &mut DiscardOutput)
                .await,
        ),
        Err(_) => None,
    };
    let t3 = Instant::now();
    let report = run.teardown().await;
    if std::env::var_os("BENCH_PHASES").is_some() {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        eprintln!(
            "phases: network {:.1} ms, provision {:.1} ms, exec {:.1} ms, teardown {:.1} ms",
            ms(t1 - t0),
            ms(t2 - t1),
            ms(t3 - t2),
            ms(t3.elapsed())
        );
    }
    made?;
    if let Some((_, e)) = report.failed.into_iter().next() {
        return Err(e);
    }
    if let Some(e) = report.network_failed {
        return Err(e);
    }
    match status {
        Some(Ok(status)) if status.code() == Some(0) => Ok(()),
        Some(Ok(status)) => Err(boitata_orchestrator::SandboxError::InvalidSpec {
            message: format!("`true` ended with {status:?}"),
        }),
        Some(Err(e)) => Err(e),
        None => Ok(()),
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("bench_sandbox: {problem}\nusage: bench_sandbox [--cycles N] [--image IMAGE] [--network bridge|run|run-bridge]");
    ExitCode::from(2)
}
