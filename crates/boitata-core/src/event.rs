//! The [`Emitter`]: how a run's events are made.
//!
//! The [`Event`] type itself lives in `boitata-protocol` (re-exported here): the CLI's
//! `--json` output, the run store (audit log), the server's SSE stream and the ACP
//! `_meta.boitata` payload all carry it. An [`Emitter`] numbers events densely from 1
//! per run, stamps them, redacts secrets, truncates large strings, stores them and only
//! then hands them to observers (printers, SSE subscribers).

use std::sync::{Arc, Mutex, RwLock};

use chrono::{SubsecRound, Utc};

pub use boitata_protocol::event::{Event, EventPayload, Outcome, OutputStream, RunStatus};

use crate::redact::Redactor;

/// Something that receives every event of a run, in order.
///
/// The run store is one (it must accept an event before anyone sees it); printers and
/// SSE fan-out are others. Called with the emitter's lock held: keep it quick.
pub trait EventSink: Send + Sync {
    /// Takes one event. An error from the *store* sink aborts the emit: an event that
    /// could not be recorded is not shown.
    fn accept(&self, event: &Event) -> Result<(), SinkError>;
}

/// An event sink failed (the store could not write, say).
#[derive(Debug, thiserror::Error)]
#[error("could not record event {seq} of run {run_id}: {message}")]
pub struct SinkError {
    /// The run.
    pub run_id: String,
    /// The event's `seq`.
    pub seq: u64,
    /// What went wrong.
    pub message: String,
}

/// Default cap on any one string inside an event, in bytes.
pub const DEFAULT_MAX_EVENT_STRING_BYTES: usize = 64 * 1024;

/// Numbers, stamps, sanitizes, records and dispatches a run's events.
///
/// Cheap to clone; all clones share one sequence. Emitting holds a lock across
/// numbering, recording and dispatch, so observers see events in `seq` order.
#[derive(Clone)]
pub struct Emitter {
    inner: Arc<EmitterInner>,
}

struct EmitterInner {
    run_id: String,
    state: Mutex<EmitterState>,
    /// Grows when a node learns a secret of its own ([`Emitter::add_secrets`]).
    redactor: RwLock<Redactor>,
    max_string_bytes: usize,
}

struct EmitterState {
    next_seq: u64,
    recorder: Option<Arc<dyn EventSink>>,
    observers: Vec<Arc<dyn EventSink>>,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("run_id", &self.inner.run_id)
            .finish_non_exhaustive()
    }
}

impl Emitter {
    /// An emitter for `run_id` whose first event gets `seq` 1.
    ///
    /// `recorder` (the run store) accepts each event first; if it fails, the event is
    /// dropped and the error returned. `redactor` scrubs secrets from every string.
    pub fn new(
        run_id: impl Into<String>,
        recorder: Option<Arc<dyn EventSink>>,
        redactor: Redactor,
    ) -> Self {
        Self::resuming(run_id, 1, recorder, redactor)
    }

    /// Like [`Emitter::new`] but the next event gets `next_seq` (for a run whose
    /// earlier events are already stored).
    pub fn resuming(
        run_id: impl Into<String>,
        next_seq: u64,
        recorder: Option<Arc<dyn EventSink>>,
        redactor: Redactor,
    ) -> Self {
        Emitter {
            inner: Arc::new(EmitterInner {
                run_id: run_id.into(),
                state: Mutex::new(EmitterState {
                    next_seq,
                    recorder,
                    observers: Vec::new(),
                }),
                redactor: RwLock::new(redactor),
                max_string_bytes: DEFAULT_MAX_EVENT_STRING_BYTES,
            }),
        }
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// The redactor applied to every event (also useful for scrubbing logs), as it is
    /// now: [`Emitter::add_secrets`] extends it.
    pub fn redactor(&self) -> Redactor {
        self.inner
            .redactor
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Adds exact secret values to the redactor of this emitter and all its clones:
    /// every later event has them replaced by `[REDACTED]`. For secrets made during
    /// a run (a per-run agent secret, say). Values shorter than 6 bytes are ignored,
    /// as [`Redactor::new`] says.
    pub fn add_secrets<I, S>(&self, secrets: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut redactor = self
            .inner
            .redactor
            .write()
            .unwrap_or_else(|p| p.into_inner());
        *redactor = redactor.with_secrets(secrets);
    }

    /// Adds an observer that sees every later event, after it is recorded.
    pub fn observe(&self, sink: Arc<dyn EventSink>) {
        let mut state = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        state.observers.push(sink);
    }

    /// Emits `payload` for `node`: assigns `seq` and `ts`, redacts secrets, truncates
    /// strings over the cap (with a marker saying how much was cut), records it, then
    /// hands it to each observer. Returns the event as recorded.
    ///
    /// # Errors
    /// [`SinkError`] if the recorder refused the event; observers' errors are logged
    /// and ignored.
    pub fn emit(&self, node: Option<&str>, payload: EventPayload) -> Result<Event, SinkError> {
        let payload = self.sanitize(payload);
        let mut state = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        let event = Event {
            run_id: self.inner.run_id.clone(),
            seq: state.next_seq,
            ts: Utc::now().trunc_subsecs(3),
            node: node.map(str::to_owned),
            payload,
        };
        if let Some(recorder) = &state.recorder {
            recorder.accept(&event)?;
        }
        state.next_seq += 1;
        for observer in &state.observers {
            if let Err(e) = observer.accept(&event) {
                tracing::warn!("event observer failed: {e}");
            }
        }
        Ok(event)
    }

    /// Emits and logs (rather than returns) a recording failure. For call sites that
    /// cannot do anything better than go on.
    pub fn emit_or_log(&self, node: Option<&str>, payload: EventPayload) {
        if let Err(e) = self.emit(node, payload) {
            tracing::error!("{e}");
        }
    }

    /// Redacts and truncates every text of `payload` in place (no round trip through
    /// JSON, so nothing can fall back to the unredacted payload).
    fn sanitize(&self, mut payload: EventPayload) -> EventPayload {
        let redactor = self
            .inner
            .redactor
            .read()
            .unwrap_or_else(|p| p.into_inner());
        let max_bytes = self.inner.max_string_bytes;
        payload.visit_text_mut(&mut |text| {
            let redacted = redactor.redact(text);
            *text = truncate_with_marker(&redacted, max_bytes);
        });
        payload
    }
}

/// Cuts `text` to at most `max_bytes` (on a char boundary) and, if anything was cut,
/// appends `…[truncated N bytes]` where N is the number of bytes removed.
pub fn truncate_with_marker(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[truncated {} bytes]", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect(Mutex<Vec<Event>>);
    impl EventSink for Collect {
        fn accept(&self, event: &Event) -> Result<(), SinkError> {
            self.0.lock().unwrap().push(event.clone());
            Ok(())
        }
    }

    #[test]
    fn events_round_trip_with_type_tag_and_dense_seq() {
        let sink = Arc::new(Collect(Mutex::new(Vec::new())));
        let emitter = Emitter::new("r1", Some(sink.clone()), Redactor::new(["sk-secret-value"]));
        emitter
            .emit(
                None,
                EventPayload::AgentMessage {
                    text: "key is sk-secret-value".into(),
                },
            )
            .unwrap();
        emitter
            .emit(
                Some("n"),
                EventPayload::RunFinished {
                    status: RunStatus::Succeeded,
                    error: None,
                },
            )
            .unwrap();
        let events = sink.0.lock().unwrap().clone();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
        let line = events[0].to_json_line();
        assert!(line.contains(r#""type":"agent_message""#), "{line}");
        assert!(!line.contains("sk-secret-value"), "{line}");
        let back: Event = serde_json::from_str(&events[1].to_json_line()).unwrap();
        assert_eq!(back, events[1]);
    }

    #[test]
    fn secrets_added_later_are_redacted_from_then_on_in_every_clone() {
        let sink = Arc::new(Collect(Mutex::new(Vec::new())));
        let emitter = Emitter::new("r", Some(sink.clone()), Redactor::default());
        let clone = emitter.clone();
        let say = |e: &Emitter, text: &str| {
            e.emit(None, EventPayload::AgentMessage { text: text.into() })
                .unwrap()
        };
        say(&emitter, "run secret 9f8e7d6c5b4a");
        emitter.add_secrets(["9f8e7d6c5b4a"]);
        say(&clone, "run secret 9f8e7d6c5b4a");
        let texts: Vec<String> = sink
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|e| match &e.payload {
                EventPayload::AgentMessage { text } => text.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            texts,
            vec!["run secret 9f8e7d6c5b4a", "run secret [REDACTED]"]
        );
        assert_eq!(clone.redactor().redact("9f8e7d6c5b4a"), "[REDACTED]");
    }

    #[test]
    fn long_strings_are_truncated_with_a_marker() {
        let emitter = Emitter::new("r", None, Redactor::default());
        let big = "é".repeat(DEFAULT_MAX_EVENT_STRING_BYTES);
        let event = emitter
            .emit(
                None,
                EventPayload::ExecOutput {
                    stream: OutputStream::Stdout,
                    chunk: big,
                },
            )
            .unwrap();
        let EventPayload::ExecOutput { chunk, .. } = event.payload else {
            panic!()
        };
        assert!(chunk.ends_with(&format!(
            "…[truncated {} bytes]",
            DEFAULT_MAX_EVENT_STRING_BYTES
        )));
    }
}
