//! A run's events, recorded in memory.

use std::sync::Mutex;

use boitata_core::event::SinkError;
use boitata_core::{Event, EventSink};

/// An [`EventSink`] keeping every event it accepts, in order: pass it (in an `Arc`) as
/// an emitter's recorder, then read [`Recorder::events`].
#[derive(Debug, Default)]
pub struct Recorder(Mutex<Vec<Event>>);

impl Recorder {
    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

impl EventSink for Recorder {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

/// The `(input_tokens, output_tokens)` of every `usage` event, in order.
pub fn usage(events: &[Event]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e.payload {
            boitata_core::EventPayload::Usage {
                input_tokens,
                output_tokens,
            } => Some((input_tokens, output_tokens)),
            _ => None,
        })
        .collect()
}

/// The message of every `budget_exceeded` event, in order.
pub fn budget_exceeded(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            boitata_core::EventPayload::BudgetExceeded { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}
