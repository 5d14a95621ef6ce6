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
