//! SSE fan-out benchmark client (used by `scripts/bench-server.sh`).
//!
//! ```text
//! sse_bench URL RUN_ID SUBSCRIBERS [TOKEN]
//! ```
//!
//! Opens SUBSCRIBERS event streams of one run at once, reads each to `run_finished`,
//! checks that every subscriber got every event exactly once and in order, and prints
//! one line of `key=value` figures: events per subscriber, total events delivered, the
//! wall time from the first connection to the last stream's end, the time from the
//! first event received to the last stream's end, and events/s over the latter.

use std::io::Write;
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;

#[derive(Debug)]
struct Received {
    events: u64,
    in_order: bool,
    finished: bool,
    first_event: Option<Instant>,
}

async fn subscribe(
    client: reqwest::Client,
    url: String,
    token: Option<String>,
) -> Result<Received, String> {
    let mut request = client.get(url).header("accept", "text/event-stream");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("status {}", response.status()));
    }
    let mut stream = response.bytes_stream().eventsource();
    let mut received = Received {
        events: 0,
        in_order: true,
        finished: false,
        first_event: None,
    };
    while let Some(message) = stream.next().await {
        let message = message.map_err(|e| e.to_string())?;
        let seq: u64 = message
            .id
            .parse()
            .map_err(|_| format!("bad id {:?}", message.id))?;
        received.events += 1;
        received.first_event.get_or_insert_with(Instant::now);
        if seq != received.events {
            received.in_order = false;
        }
        if message.data.contains("\"type\":\"run_finished\"") {
            received.finished = true;
            break;
        }
    }
    Ok(received)
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: sse_bench URL RUN_ID SUBSCRIBERS [TOKEN]".to_owned());
    }
    let url = format!(
        "{}/api/runs/{}/events",
        args[1].trim_end_matches('/'),
        args[2]
    );
    let subscribers: usize = args[3].parse().map_err(|e| format!("SUBSCRIBERS: {e}"))?;
    let token = args.get(4).cloned();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(subscribers)
            .timeout(Duration::from_secs(600))
            .build()
            .map_err(|e| e.to_string())?;
        let started = Instant::now();
        let tasks: Vec<_> = (0..subscribers)
            .map(|_| tokio::spawn(subscribe(client.clone(), url.clone(), token.clone())))
            .collect();
        let mut per_subscriber = Vec::new();
        let mut first_event: Option<Instant> = None;
        for task in tasks {
            let received = task.await.map_err(|e| e.to_string())??;
            if !received.finished || !received.in_order {
                return Err(format!("a subscriber got a broken stream: {received:?}"));
            }
            per_subscriber.push(received.events);
            first_event = match (first_event, received.first_event) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let elapsed = started.elapsed().as_secs_f64();
        // From the first event any subscriber saw to the last stream's end.
        let streaming = first_event.map_or(elapsed, |t| t.elapsed().as_secs_f64());
        let total: u64 = per_subscriber.iter().sum();
        let min = per_subscriber.iter().min().copied().unwrap_or(0);
        let max = per_subscriber.iter().max().copied().unwrap_or(0);
        if min != max {
            return Err(format!("subscribers got different event counts: {min}..{max}"));
        }
        let _ = writeln!(
            std::io::stdout(),
            "subscribers={subscribers} events_per_subscriber={max} events_delivered={total} seconds={elapsed:.3} streaming_seconds={streaming:.3} events_per_second={:.0}",
            total as f64 / streaming
        );
        Ok(())
    })
}
