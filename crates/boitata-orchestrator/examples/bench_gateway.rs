//! Times streamed model requests through the model gateway against the same requests
//! sent straight to the same fake model server (on loopback), interleaved, and prints
//! p50 and p95 of each and their ratio. Used by `scripts/bench-gateway.sh`.
//!
//! Each request is a streamed Chat Completions call whose answer (a few text chunks,
//! the usage chunk, `[DONE]`) is read to its end, as an agent reads it.
//!
//! ```sh
//! cargo run --release -p boitata-orchestrator --example bench_gateway -- --requests 1000
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::{IpAddr, Ipv4Addr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use boitata_core::budget::BudgetMeter;
use boitata_core::{Emitter, Redactor};
use boitata_orchestrator::gateway::{ModelGateway, RunGrant, Upstream, UpstreamApi};
use boitata_test_support::openai::{done, finish_chunk, openai_sse, text_chunk, usage_chunk};
use boitata_test_support::FakeModel;
use wiremock::matchers::method;
use wiremock::Mock;

#[tokio::main]
async fn main() -> ExitCode {
    let mut requests: usize = 1000;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--requests", Some(n)) => match n.parse() {
                Ok(n) if n > 0 => requests = n,
                _ => return usage(&format!("--requests {n}: not a positive number")),
            },
            _ => return usage(&format!("unexpected argument {arg:?}")),
        }
    }
    match run(requests).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("bench_gateway: {problem}\nusage: bench_gateway [--requests N]");
    ExitCode::from(2)
}

async fn run(requests: usize) -> Result<(), Box<dyn std::error::Error>> {
    let model = FakeModel::openai().await;
    Mock::given(method("POST"))
        .respond_with(openai_sse(vec![
            text_chunk("Let me "),
            text_chunk("look at "),
            text_chunk("the tests."),
            finish_chunk("stop"),
            usage_chunk(1200, 30),
            done(),
        ]))
        .mount(model.server())
        .await;
    let direct_url = format!("{}/chat/completions", model.base_url());
    let key = "sk-bench-real-key";

    let gateway = ModelGateway::new()?;
    let token = gateway.grant(RunGrant {
        run_id: "bench".into(),
        upstream: Upstream {
            api: UpstreamApi::OpenAi,
            url: direct_url.clone(),
            api_key: Some(key.into()),
        },
        budget: BudgetMeter::default(),
        emitter: Emitter::new("bench", None, Redactor::default()),
    })?;
    let addr = gateway
        .serve_on(&token, IpAddr::V4(Ipv4Addr::LOCALHOST))
        .await?;
    let gateway_url = format!("{}/chat/completions", UpstreamApi::OpenAi.base_url(addr));

    let client = reqwest::Client::new();
    let body = serde_json::json!({
        "model": "gpt-test",
        "stream": true,
        "messages": [{"role": "user", "content": "make the tests pass"}],
    });
    let one = |url: String, auth: String| {
        let request = client.post(url).bearer_auth(auth).json(&body);
        async move {
            let started = Instant::now();
            let answer = request.send().await?.error_for_status()?;
            let bytes = answer.bytes().await?;
            if !bytes.ends_with(b"data: [DONE]\n\n") {
                return Err(format!("an answer did not end with [DONE]: {bytes:?}").into());
            }
            Ok::<Duration, Box<dyn std::error::Error>>(started.elapsed())
        }
    };

    // Warm both paths (connections, the server's first answers).
    for _ in 0..50 {
        one(direct_url.clone(), key.to_owned()).await?;
        one(gateway_url.clone(), token.clone()).await?;
    }
    let mut direct = Vec::with_capacity(requests);
    let mut through = Vec::with_capacity(requests);
    for i in 0..requests {
        // Interleaved, alternating which goes first.
        if i % 2 == 0 {
            direct.push(one(direct_url.clone(), key.to_owned()).await?);
            through.push(one(gateway_url.clone(), token.clone()).await?);
        } else {
            through.push(one(gateway_url.clone(), token.clone()).await?);
            direct.push(one(direct_url.clone(), key.to_owned()).await?);
        }
    }
    let (d50, d95) = (percentile(&mut direct, 50), percentile(&mut direct, 95));
    let (g50, g95) = (percentile(&mut through, 50), percentile(&mut through, 95));
    println!("{requests} streamed requests each (interleaved), milliseconds:");
    println!("{:<28} {:>8} {:>8}", "", "p50", "p95");
    println!(
        "{:<28} {:>8.3} {:>8.3}",
        "direct to the fake model",
        ms(d50),
        ms(d95)
    );
    println!(
        "{:<28} {:>8.3} {:>8.3}",
        "through the gateway",
        ms(g50),
        ms(g95)
    );
    println!(
        "{:<28} {:>8.3} {:>8.3}",
        "added by the gateway",
        ms(g50) - ms(d50),
        ms(g95) - ms(d95)
    );
    println!(
        "ratio gateway/direct: p50 {:.2}, p95 {:.2}",
        ms(g50) / ms(d50),
        ms(g95) / ms(d95)
    );
    Ok(())
}

fn percentile(samples: &mut [Duration], p: usize) -> Duration {
    samples.sort_unstable();
    let index = (samples.len() * p / 100).min(samples.len().saturating_sub(1));
    samples[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
