//! A model server that sends too much, or never stops: caps and the total timeout end
//! the request with a clear error instead of memory and CPU without end.

use std::time::{Duration, Instant};

use boitata_provider::openai::OpenAi;
use boitata_provider::{
    HttpOptions, Message, ModelRequest, ProviderError, RetryPolicy, StreamEvent,
};
use boitata_test_support::openai::*;
use boitata_test_support::{endless_sse_server, stream_until_error, FakeModel};
use wiremock::ResponseTemplate;

fn ask() -> ModelRequest {
    ModelRequest {
        system: "be brief".to_owned(),
        messages: vec![Message::User {
            content: "hi".to_owned(),
        }],
        ..ModelRequest::default()
    }
}

fn openai(base_url: &str) -> OpenAi {
    OpenAi::new(
        HttpOptions::new("gpt-test")
            .base_url(base_url)
            .timeout(Duration::from_secs(5))
            .retry(RetryPolicy::never()),
    )
    .unwrap()
}

/// The stream's events and its error, which must come within `patience`.
async fn until_error(openai: &OpenAi, patience: Duration) -> (Vec<StreamEvent>, ProviderError) {
    let (events, err) = tokio::time::timeout(patience, stream_until_error(openai, &ask()))
        .await
        .expect("the response was read without end");
    (events, err.expect("the response must end in an error"))
}

#[tokio::test]
async fn a_ten_megabyte_line_is_refused_quickly() {
    let model = FakeModel::openai().await;
    let mut body = String::from("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
    body.push_str(&"a".repeat(10 * 1024 * 1024));
    body.push_str("\"}}]}\n\n");
    model
        .push(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .await;
    let started = Instant::now();
    let (events, err) = until_error(&openai(&model.base_url()), Duration::from_secs(60)).await;
    assert!(events.is_empty(), "{events:?}");
    assert!(
        matches!(err, ProviderError::MalformedStream { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("an event-stream line is longer than 8 MiB"),
        "{err}"
    );
    // Linear work: seconds at most even unoptimised (quadratic parsing took minutes).
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_long_answer_in_many_lines_still_streams() {
    // 2 MiB of text in 2 KiB deltas: far more than one line's cap, all of it fine.
    let model = FakeModel::openai().await;
    let piece = "b".repeat(2048);
    let mut events: Vec<_> = (0..1024).map(|_| text_chunk(&piece)).collect();
    events.push(finish_chunk("stop"));
    events.push(done());
    model.push(openai_sse(events)).await;
    let (streamed, err) = stream_until_error(&openai(&model.base_url()), &ask()).await;
    assert!(err.is_none(), "{err:?}");
    let text: usize = streamed
        .iter()
        .map(|e| match e {
            StreamEvent::TextDelta(t) => t.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(text, 2048 * 1024);
}

#[tokio::test]
async fn an_endless_stream_is_cut_at_the_response_cap() {
    // Comments only (no events), 64 KiB at a time, as fast as they are read.
    let piece = format!(": {}\n", "k".repeat(64 * 1024));
    let base_url = endless_sse_server(piece, Duration::ZERO).await.unwrap();
    let (_, err) = until_error(&openai(&format!("{base_url}/v1")), Duration::from_secs(120)).await;
    assert!(
        matches!(err, ProviderError::MalformedStream { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("the response is larger than 64 MiB"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stream_that_trickles_forever_ends_at_the_total_timeout() {
    // A keep-alive every 50 ms: the idle timeout (5 s) never fires.
    let base_url = endless_sse_server(": ping\n".to_owned(), Duration::from_millis(50))
        .await
        .unwrap();
    let openai = OpenAi::new(
        HttpOptions::new("gpt-test")
            .base_url(format!("{base_url}/v1"))
            .timeout(Duration::from_secs(5))
            .total_timeout(Duration::from_secs(1))
            .retry(RetryPolicy::never()),
    )
    .unwrap();
    let (_, err) = until_error(&openai, Duration::from_secs(30)).await;
    assert!(
        matches!(err, ProviderError::ResponseTooSlow { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("provider.total_timeout"), "{err}");
}
