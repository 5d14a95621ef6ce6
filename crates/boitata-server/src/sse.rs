//! `GET /api/runs/{id}/events`: a run's events as Server-Sent Events.
//!
//! Each message is one [`Event`](boitata_core::Event) as JSON, with the SSE `id:` set
//! to its `seq`. A client that reconnects with `Last-Event-ID: N` gets the events
//! after `N`. The stream ends after `run_finished`. Comments (`: keep-alive`) keep
//! idle connections open through proxies, and `X-Accel-Buffering: no` tells nginx not
//! to buffer.
//!
//! No gap, no duplicate: the stream subscribes to the run's live channel *before*
//! reading the stored backlog, then skips any live event whose `seq` it has already
//! sent. Every event is stored before it is broadcast, so an event the subscription
//! missed is in the backlog. A subscriber that falls behind the channel re-reads from
//! the store where it left off.
//!
//! With `Accept: application/json` (and not `text/event-stream`) the answer is
//! instead a JSON array of the events stored so far: a snapshot, for `boitata runs
//! show --remote`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use boitata_core::store::RunStore;
use futures::Stream;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::ended_runs::EventLog;
use crate::error::AppError;
use crate::scheduler::LiveEvent;
use crate::state::AppState;

/// The `X-Accel-Buffering` header (nginx).
const X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

/// The `Last-Event-ID` header (SSE).
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// A run's events (SSE), from after `Last-Event-ID` to `run_finished`.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/events",
    tag = "runs",
    params(
        ("id" = String, Path, description = "The run id"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Send only events with a larger seq (SSE reconnection)"),
    ),
    responses(
        (status = 200, description = "text/event-stream: one Event (JSON) per message, `id:` = seq, closing after run_finished. With `Accept: application/json`: the stored events as a JSON array.", content_type = "text/event-stream", body = String),
        (status = 400, description = "Bad Last-Event-ID", body = crate::error::ErrorBody),
        (status = 401, description = "Missing or wrong token", body = crate::error::ErrorBody),
        (status = 404, description = "No such run", body = crate::error::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn run_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let after = match headers.get(LAST_EVENT_ID) {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                AppError::BadRequest(
                    "Last-Event-ID must be an event seq (a whole number)".to_owned(),
                )
            })?,
    };
    let store = state.store().clone();
    let run = {
        let store = store.clone();
        let id = id.clone();
        tokio::task::spawn_blocking(move || store.run(&id)).await??
    };

    if wants_json(&headers) {
        let events = {
            let store = store.clone();
            tokio::task::spawn_blocking(move || store.events(&run.id, after)).await??
        };
        return Ok(Json(events).into_response());
    }

    // Subscribe first, then read the backlog: see the module docs.
    let live = state.scheduler().subscribe(&run.id);
    let (log, backlog) = if live.is_none() && run.status.is_final() {
        // An ended run: its log is complete, and shared with its other subscribers.
        let log = state.ended_runs().log(&store, &run.id).await?;
        let start = usize::try_from(after).unwrap_or(usize::MAX).min(log.len());
        (Some((log, start)), VecDeque::new())
    } else {
        (None, read_after(&store, &run.id, after).await?.into())
    };
    let stream = EventStream {
        store,
        run_id: run.id,
        last_sent: after,
        log,
        backlog,
        live,
        done: false,
    }
    .into_stream();
    let sse = Sse::new(stream).keep_alive(
        KeepAlive::new()
            .interval(state.keep_alive())
            .text("keep-alive"),
    );
    let mut response = sse.into_response();
    response
        .headers_mut()
        .insert(X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
    Ok(response)
}

/// Whether the client asked for a JSON snapshot rather than a stream.
fn wants_json(headers: &HeaderMap) -> bool {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    accept.contains("application/json") && !accept.contains("text/event-stream")
}

/// The stored events after `after`, serialized.
async fn read_after(
    store: &Arc<dyn RunStore>,
    run_id: &str,
    after: u64,
) -> Result<Vec<Arc<LiveEvent>>, AppError> {
    let store = store.clone();
    let run_id = run_id.to_owned();
    let events = tokio::task::spawn_blocking(move || store.events(&run_id, after)).await??;
    Ok(events.iter().map(|e| Arc::new(LiveEvent::new(e))).collect())
}

/// One subscriber's position in a run's events.
struct EventStream {
    store: Arc<dyn RunStore>,
    run_id: String,
    last_sent: u64,
    /// An ended run's shared log and the position in it.
    log: Option<(EventLog, usize)>,
    backlog: VecDeque<Arc<LiveEvent>>,
    live: Option<broadcast::Receiver<Arc<LiveEvent>>>,
    done: bool,
}

impl EventStream {
    fn into_stream(self) -> impl Stream<Item = Result<SseEvent, Infallible>> + Send + 'static {
        futures::stream::unfold(self, |mut this| async move {
            let event = this.next_event().await?;
            Some((Ok(event), this))
        })
    }

    /// The next event to send, or `None` when the stream is over.
    async fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            if self.done {
                return None;
            }
            if let Some((log, position)) = self.log.as_mut() {
                match log.get(*position).cloned() {
                    Some(event) => {
                        *position += 1;
                        if event.seq > self.last_sent {
                            return Some(self.send(&event));
                        }
                        continue;
                    }
                    None => self.log = None,
                }
            }
            if let Some(event) = self.backlog.pop_front() {
                if event.seq <= self.last_sent {
                    continue;
                }
                return Some(self.send(&event));
            }
            let Some(live) = self.live.as_mut() else {
                // Not executed here now: it has ended, or another process (a local
                // `boitata run` sharing the data dir) executes it and the store is
                // the only way to follow it.
                if self.refill().await {
                    continue;
                }
                if self.done {
                    return None;
                }
                if self.run_has_ended().await {
                    // Its run_finished is stored with its final status: one last read.
                    if self.refill().await {
                        continue;
                    }
                    return None;
                }
                tokio::time::sleep(FOREIGN_RUN_POLL).await;
                continue;
            };
            match live.recv().await {
                Ok(event) if event.seq <= self.last_sent => continue,
                Ok(event) if event.seq == self.last_sent + 1 => return Some(self.send(&event)),
                // A gap (it cannot happen with dense seqs, but the store knows).
                Ok(_) | Err(RecvError::Lagged(_)) => {
                    self.refill().await;
                }
                Err(RecvError::Closed) => {
                    self.live = None;
                }
            }
        }
    }

    /// Re-reads the store after the last event sent; false when nothing new was there.
    async fn refill(&mut self) -> bool {
        match read_after(&self.store, &self.run_id, self.last_sent).await {
            Ok(events) if !events.is_empty() => {
                self.backlog.extend(events);
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::error!(run = %self.run_id, "cannot read stored events: {e}");
                // Stop rather than spin on a broken store; the client can reconnect.
                self.done = true;
                false
            }
        }
    }

    /// Whether the run's stored status is final (or the run cannot be read).
    async fn run_has_ended(&self) -> bool {
        let store = self.store.clone();
        let run_id = self.run_id.clone();
        match tokio::task::spawn_blocking(move || store.run(&run_id)).await {
            Ok(Ok(run)) => run.status.is_final(),
            _ => true,
        }
    }

    fn send(&mut self, event: &LiveEvent) -> SseEvent {
        self.last_sent = event.seq;
        if event.finished {
            self.done = true;
        }
        SseEvent::default()
            .id(event.seq.to_string())
            .data(event.json.as_str())
    }
}

/// How often a run executed by another process is polled in the store.
const FOREIGN_RUN_POLL: Duration = Duration::from_millis(500);

/// The default interval between keep-alive comments.
pub(crate) const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);
