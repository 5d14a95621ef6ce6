//! The run store as the engine uses it: [`boitata_store`]'s [`RunStore`] (re-exported
//! here with its types), and [`RunEmitters`], which makes emitters that record into a
//! store and redact with its redactor.
//!
//! ```no_run
//! # fn main() -> Result<(), boitata_core::store::StoreError> {
//! use std::sync::Arc;
//! use boitata_core::store::{NewRun, RunEmitters, RunStore, SqliteStore};
//! use boitata_core::{EventPayload, Redactor};
//!
//! let store: Arc<dyn RunStore> =
//!     Arc::new(SqliteStore::open(std::path::Path::new("/tmp/boitata-data"), Redactor::default())?);
//! let run = store.create_run(&NewRun { task: "fix the tests".into(), ..NewRun::default() })?;
//! let emitter = store.emitter(run.id.clone());
//! emitter.emit_or_log(None, EventPayload::AgentMessage { text: "hello".into() });
//! # Ok(()) }
//! ```

use std::sync::Arc;

pub use boitata_store::{NewRun, RunRecord, RunStore, SqliteStore, StoreError, DB_FILE};

use crate::event::{Emitter, Event, EventSink, SinkError};

/// Emitters on a store: every event they emit is recorded there before anyone sees
/// it, and redacted with the store's redactor.
pub trait RunEmitters {
    /// An emitter for the stored run `run_id` (first event `seq` 1).
    fn emitter(&self, run_id: impl Into<String>) -> Emitter;

    /// Like [`RunEmitters::emitter`] for a run whose earlier events are stored: the next
    /// event continues after the last one.
    ///
    /// # Errors
    /// The store's error reading the last `seq` ([`StoreError::Sqlite`] for SQLite).
    fn resuming_emitter(&self, run_id: &str) -> Result<Emitter, StoreError>;
}

impl RunEmitters for Arc<dyn RunStore> {
    fn emitter(&self, run_id: impl Into<String>) -> Emitter {
        Emitter::new(run_id, Some(recorder(self)), self.redactor())
    }

    fn resuming_emitter(&self, run_id: &str) -> Result<Emitter, StoreError> {
        let next_seq = self.last_seq(run_id)? + 1;
        Ok(Emitter::resuming(
            run_id,
            next_seq,
            Some(recorder(self)),
            self.redactor(),
        ))
    }
}

/// `store` as the sink that records an emitter's events.
pub fn recorder(store: &Arc<dyn RunStore>) -> Arc<dyn EventSink> {
    Arc::new(StoreRecorder(store.clone()))
}

/// Appends each event to the store; a refused append refuses the event.
struct StoreRecorder(Arc<dyn RunStore>);

impl EventSink for StoreRecorder {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        self.0.append_event(event).map_err(|e| SinkError {
            run_id: event.run_id.clone(),
            seq: event.seq,
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::event::{Emitter, EventPayload, RunStatus};
    use crate::Redactor;

    #[test]
    fn events_are_stored_in_order_and_drive_the_run_status() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn RunStore> =
            Arc::new(SqliteStore::open(dir.path(), Redactor::default()).unwrap());
        let run = store
            .create_run(&NewRun {
                task: "t".into(),
                ..NewRun::default()
            })
            .unwrap();
        let emitter = Emitter::new(run.id.clone(), Some(recorder(&store)), Redactor::default());
        emitter
            .emit(
                None,
                EventPayload::RunStarted {
                    task: "t".into(),
                    blueprint: None,
                    workspace: None,
                    provider: None,
                    model: None,
                },
            )
            .unwrap();
        emitter
            .emit(
                None,
                EventPayload::RunFinished {
                    status: RunStatus::Failed,
                    error: Some("boom".into()),
                },
            )
            .unwrap();
        let events = store.events(&run.id, 0).unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(store.events(&run.id, 1).unwrap().len(), 1);
        let after = store.find_run(&run.id[..8]).unwrap();
        assert_eq!(after.status, RunStatus::Failed);
        assert_eq!(after.error.as_deref(), Some("boom"));
        assert!(after.finished_at.is_some());
        assert_eq!(store.last_seq(&run.id).unwrap(), 2);
    }

    #[test]
    fn task_and_params_are_stored_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let mut params = serde_json::Map::new();
        params.insert("token".into(), "hunter2-known-secret".into());
        params.insert("key".into(), "sk-test-secret-123456789".into());
        params.insert(
            "nested".into(),
            serde_json::json!({"list": ["hunter2-known-secret", 3]}),
        );
        let new = NewRun {
            task: "task sk-test-secret-123456789 and hunter2-known-secret".into(),
            params,
            ..NewRun::default()
        };

        // Without being told any secret, the store still scrubs key shapes.
        let plain = SqliteStore::open(dir.path(), Redactor::default()).unwrap();
        let run = plain.create_run(&new).unwrap();
        assert_eq!(run.task, "task [REDACTED] and hunter2-known-secret");
        assert_eq!(run.params["key"], "[REDACTED]");

        // With the caller's secrets.
        let known = Redactor::new(["hunter2-known-secret"]);
        let store: Arc<dyn RunStore> = Arc::new(SqliteStore::open(dir.path(), known).unwrap());
        let stored = store.create_run(&new).unwrap();
        let reread = store.run(&stored.id).unwrap();
        let row = format!(
            "{} {}",
            reread.task,
            serde_json::Value::Object(reread.params.clone())
        );
        assert!(!row.contains("hunter2"), "{row}");
        assert!(!row.contains("sk-test"), "{row}");
        assert_eq!(reread.task, "task [REDACTED] and [REDACTED]");
        assert_eq!(reread.params["token"], "[REDACTED]");
        assert_eq!(
            reread.params["nested"],
            serde_json::json!({"list": ["[REDACTED]", 3]})
        );

        // Its emitters and its status errors redact the same secrets.
        let emitter = store.emitter(stored.id.clone());
        emitter
            .emit(
                None,
                EventPayload::AgentMessage {
                    text: "said hunter2-known-secret".into(),
                },
            )
            .unwrap();
        let events = store.events(&stored.id, 0).unwrap();
        assert!(!events[0].to_json_line().contains("hunter2"));
        store
            .set_status(
                &stored.id,
                RunStatus::Failed,
                Some("failed: hunter2-known-secret"),
            )
            .unwrap();
        assert_eq!(
            store.run(&stored.id).unwrap().error.as_deref(),
            Some("failed: [REDACTED]")
        );
        let resumed = store.resuming_emitter(&stored.id).unwrap();
        let event = resumed
            .emit(
                None,
                EventPayload::AgentMessage {
                    text: "hunter2-known-secret".into(),
                },
            )
            .unwrap();
        assert_eq!(event.seq, 2);
    }

    #[test]
    fn a_failed_write_is_not_shown() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn RunStore> =
            Arc::new(SqliteStore::open(dir.path(), Redactor::default()).unwrap());
        let run = store.create_run(&NewRun::default()).unwrap();
        let emitter = Emitter::new(run.id, Some(recorder(&store)), Redactor::default());
        emitter
            .emit(None, EventPayload::AgentMessage { text: "x".into() })
            .unwrap();
        // An emitter for an unknown run cannot record, so it must not number the event.
        let orphan = Emitter::new("no-such-run", Some(recorder(&store)), Redactor::default());
        assert!(orphan
            .emit(None, EventPayload::AgentMessage { text: "x".into() })
            .is_err());
    }
}
