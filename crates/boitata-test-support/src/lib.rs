//! Shared test helpers for Boitata's crates: real git repositories in temp dirs,
//! fake model servers, Docker fixtures. Test code only: helpers panic on failure.
//!
//! - [`repo`]: real git repositories in temp dirs.
//! - [`docker`]: Docker fixtures (skip locally / fail under `CI=true` without a
//!   daemon, the base image, cleanup of a run's containers by label).
//! - [`events`]: a [`Recorder`](events::Recorder) of a run's events.
//! - [`server`]: a `boitata-server` process on a free port; [`browser`]: a
//!   headless Chromium behind chromedriver for UI tests.
//! - [`FakeModel`]: a real HTTP server ([`wiremock`]) standing in for a model API. Queue
//!   responses, point a provider's `base_url` at it, then read back what was sent.
//! - [`openai`] and [`anthropic`]: small builders for each API's streamed events, so a
//!   test reads like the stream it fakes.
//! - [`sse`]: the Server-Sent Events framing both use.
//! - [`stalling_sse_server`]: a server whose stream stops mid-answer (idle timeouts).
//! - [`endless_sse_server`]: a server whose stream never ends (caps, total timeouts).
//!
//! # Example
//!
//! ```no_run
//! use boitata_test_support::openai::{done, openai_sse, text_chunk, finish_chunk};
//! use boitata_test_support::FakeModel;
//!
//! # async fn demo() {
//! let model = FakeModel::openai().await;
//! model
//!     .push(openai_sse(vec![text_chunk("hi"), finish_chunk("stop"), done()]))
//!     .await;
//! // ... OpenAi::new(HttpOptions::new("gpt-test").base_url(model.base_url())) ...
//! let sent = model.bodies().await;
//! # let _ = sent;
//! # }
//! ```

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

pub mod anthropic;
pub mod browser;
pub mod docker;
pub mod events;
mod fake_model;
pub mod openai;
pub mod repo;
pub mod server;
pub mod sse;
mod stalling;

use std::time::Duration;

use boitata_provider::{ModelRequest, Provider, ProviderError, RetryPolicy, StreamEvent};
use futures::StreamExt;

pub use fake_model::FakeModel;
pub use stalling::{endless_sse_server, stalling_sse_server};

/// A retry policy with millisecond waits, so tests of retries stay fast.
pub fn fast_retry(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(10),
    }
}

/// Everything `provider` streams for `request`, or the first error (from the request
/// or from the stream).
pub async fn stream_events(
    provider: &dyn Provider,
    request: &ModelRequest,
) -> Result<Vec<StreamEvent>, ProviderError> {
    let mut stream = provider.stream(request).await?;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        events.push(event?);
    }
    Ok(events)
}

/// Like [`stream_events`], but also returns the events streamed before an error.
pub async fn stream_until_error(
    provider: &dyn Provider,
    request: &ModelRequest,
) -> (Vec<StreamEvent>, Option<ProviderError>) {
    let mut stream = match provider.stream(request).await {
        Ok(stream) => stream,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => events.push(event),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}
