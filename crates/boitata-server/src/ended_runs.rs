//! The serialized events of recently ended runs, shared by their SSE subscribers.
//!
//! An ended run's event log never changes, and a popular run (a link passed around, a
//! dashboard left open) is replayed by many subscribers at once. Each would otherwise
//! read and serialize the whole log for itself; here the first reads it and the
//! others share that copy. A few runs are kept, and only runs of at most
//! [`MAX_CACHED_EVENTS`] events.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use boitata_core::store::RunStore;
use tokio::sync::OnceCell;

use crate::error::AppError;
use crate::scheduler::LiveEvent;

/// How many ended runs are kept.
const CACHED_RUNS: usize = 8;

/// The largest log kept, in events.
pub(crate) const MAX_CACHED_EVENTS: usize = 100_000;

/// A run's whole event log, in `seq` order (`events[i].seq == i + 1`).
pub(crate) type EventLog = Arc<[Arc<LiveEvent>]>;

type Slot = Arc<OnceCell<EventLog>>;

/// Recently ended runs' logs, most recently used last.
#[derive(Default)]
pub(crate) struct EndedRuns {
    entries: Mutex<VecDeque<(String, Slot)>>,
}

impl EndedRuns {
    fn slot(&self, run_id: &str) -> Slot {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = entries.iter().position(|(id, _)| id == run_id) {
            if let Some(entry) = entries.remove(at) {
                let slot = entry.1.clone();
                entries.push_back(entry);
                return slot;
            }
        }
        if entries.len() >= CACHED_RUNS {
            entries.pop_front();
        }
        let slot = Slot::default();
        entries.push_back((run_id.to_owned(), slot.clone()));
        slot
    }

    fn forget(&self, run_id: &str) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|(id, _)| id != run_id);
    }

    /// The whole log of `run_id`, which must have ended (its status is final, so its
    /// `run_finished` is stored). Concurrent callers for the same run share one read.
    pub(crate) async fn log(
        &self,
        store: &Arc<dyn RunStore>,
        run_id: &str,
    ) -> Result<EventLog, AppError> {
        let slot = self.slot(run_id);
        let log = slot
            .get_or_try_init(|| async {
                let store = store.clone();
                let id = run_id.to_owned();
                let events = tokio::task::spawn_blocking(move || store.events(&id, 0)).await??;
                Ok::<EventLog, AppError>(
                    events.iter().map(|e| Arc::new(LiveEvent::new(e))).collect(),
                )
            })
            .await?
            .clone();
        let dense = log.iter().enumerate().all(|(i, e)| e.seq == i as u64 + 1);
        let ended = log.last().is_some_and(|e| e.finished);
        if !(dense && ended && log.len() <= MAX_CACHED_EVENTS) {
            self.forget(run_id);
        }
        Ok(log)
    }
}
