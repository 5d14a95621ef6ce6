//! The run store: runs and their events in one SQLite file (`boitata.db` in the data
//! dir), shared safely by several processes (WAL, busy timeout).
//!
//! Events are append-only (triggers refuse `UPDATE` and `DELETE`), keyed by
//! `(run_id, seq)`. Appending a `run_started` event marks the run `running`; appending
//! `run_finished` sets its final status, error and `finished_at`, in the same
//! transaction, so a run's row never disagrees with its events.
//!
//! A store is opened with the run's [`Redactor`] ([`Config::redactor`]), and
//! everything written through it is redacted by that one redactor: a run's task,
//! params and error by the store itself, its events by the emitters it makes
//! ([`RunStore::emitter`], [`RunStore::resuming_emitter`]). The CLI, the server and
//! its recovery all write this way, so none of them can store what another would hide.
//!
//! [`Config::redactor`]: crate::config::Config::redactor
//!
//! ```no_run
//! # fn main() -> Result<(), boitata_core::store::StoreError> {
//! use boitata_core::store::{NewRun, RunStore};
//! use boitata_core::Redactor;
//! let store = RunStore::open(std::path::Path::new("/tmp/boitata-data"), Redactor::default())?;
//! let run = store.create_run(&NewRun { task: "fix the tests".into(), ..NewRun::default() })?;
//! for event in store.events(&run.id, 0)? {
//!     println!("{}", event.to_json_line());
//! }
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::event::{Emitter, Event, EventPayload, EventSink, RunStatus, SinkError};
use crate::redact::Redactor;

/// The database file name inside the data dir.
pub const DB_FILE: &str = "boitata.db";

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS runs (
    id          TEXT PRIMARY KEY,
    blueprint   TEXT,
    task        TEXT NOT NULL,
    params      TEXT NOT NULL DEFAULT '{}',
    workspace   TEXT,
    status      TEXT NOT NULL,
    error       TEXT,
    owner_pid   INTEGER,
    owner_scope TEXT,
    created_at  TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq    INTEGER NOT NULL,
    ts     TEXT NOT NULL,
    type   TEXT NOT NULL,
    node   TEXT,
    body   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS events_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
"#;

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run id (a UUID v7: sorts by creation time).
    pub id: String,
    /// The blueprint's name, for blueprint runs.
    pub blueprint: Option<String>,
    /// The task string.
    pub task: String,
    /// Blueprint parameters given.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// The host workspace, for runs that have one.
    pub workspace: Option<String>,
    /// Current status.
    pub status: RunStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// The process that executes the run (for telling a live run from an orphan).
    pub owner_pid: Option<u32>,
    /// Where `owner_pid` means something ([`boitata_tools::process::owner_scope`]).
    #[serde(default, skip_serializing)]
    pub owner_scope: Option<String>,
    /// When it was created (RFC 3339 UTC).
    pub created_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<RunRecord> for boitata_protocol::api::RunView {
    /// The run as the API shows it: without the host workspace or the owner process,
    /// which stay private to the machine that runs it.
    fn from(run: RunRecord) -> Self {
        boitata_protocol::api::RunView {
            id: run.id,
            blueprint: run.blueprint,
            task: run.task,
            params: run.params,
            status: run.status,
            error: run.error,
            created_at: run.created_at,
            finished_at: run.finished_at,
        }
    }
}

impl RunRecord {
    /// True when the run's owner process is known to be gone: it was recorded in this
    /// host and PID namespace and no such process runs now. False when it runs, or
    /// when it cannot be judged from here (no owner, another scope).
    pub fn owner_gone(&self) -> bool {
        let Some(pid) = self.owner_pid else {
            return false;
        };
        if self.owner_scope.as_deref() != Some(boitata_tools::process::owner_scope().as_str()) {
            return false;
        }
        pid != std::process::id() && !boitata_tools::process::pid_alive(pid)
    }
}

/// What [`RunStore::create_run`] needs.
#[derive(Debug, Clone, Default)]
pub struct NewRun {
    /// The id to use; `None` makes a fresh UUID v7.
    pub id: Option<String>,
    /// The blueprint's name.
    pub blueprint: Option<String>,
    /// The task string.
    pub task: String,
    /// Blueprint parameters.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// The host workspace.
    pub workspace: Option<String>,
    /// The initial status (default `running`; a server queues with `queued`).
    pub status: Option<RunStatus>,
    /// The process that executes the run.
    pub owner_pid: Option<u32>,
}

impl NewRun {
    /// This run with `redactor` applied to its task and to every string in its params
    /// (nested ones included): what to store, since a task or a `--param` may carry a
    /// key.
    fn redacted(&self, redactor: &Redactor) -> NewRun {
        NewRun {
            task: redactor.redact(&self.task),
            params: self
                .params
                .iter()
                .map(|(name, value)| (name.clone(), redact_json(redactor, value)))
                .collect(),
            ..self.clone()
        }
    }
}

/// `value` with every string in it redacted.
fn redact_json(redactor: &Redactor, value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) => Value::String(redactor.redact(text)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| redact_json(redactor, v)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), redact_json(redactor, v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What can go wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The data dir could not be created.
    #[error("cannot create data dir {path}: {source} (set --data-dir or BOITATA_DATA_DIR to a writable directory)")]
    CreateDir {
        /// The dir.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// SQLite failed.
    #[error("run store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
    /// No run has that id (or prefix).
    #[error("no run {0:?} (see `boitata runs list`)")]
    NotFound(String),
    /// An id prefix matches several runs.
    #[error("run id prefix {prefix:?} is ambiguous: matches {count} runs; give more characters")]
    Ambiguous {
        /// The prefix.
        prefix: String,
        /// How many runs match.
        count: usize,
    },
    /// A stored row could not be decoded.
    #[error("run store {path}: corrupt row: {message}")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
}

/// The SQLite run store. Share it behind an `Arc`.
#[derive(Debug)]
pub struct RunStore {
    path: PathBuf,
    conn: Mutex<Connection>,
    redactor: Redactor,
}

fn now_text() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_ts(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

impl RunStore {
    /// Opens (creating if needed) `DIR/boitata.db`, redacting what is written with
    /// `redactor` (pass [`Config::redactor`](crate::config::Config::redactor); the
    /// credential shapes are always redacted, even with `Redactor::default()`).
    ///
    /// # Errors
    /// [`StoreError::CreateDir`] or [`StoreError::Sqlite`].
    pub fn open(data_dir: &Path, redactor: Redactor) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::CreateDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        Self::open_file(&data_dir.join(DB_FILE), redactor)
    }

    /// Opens (creating if needed) the database at `path`, redacting with `redactor`
    /// like [`RunStore::open`].
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn open_file(path: &Path, redactor: Redactor) -> Result<Self, StoreError> {
        let wrap = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(wrap)?;
        conn.busy_timeout(Duration::from_secs(30)).map_err(wrap)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(wrap)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(wrap)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(wrap)?;
        conn.execute_batch(SCHEMA).map_err(wrap)?;
        // Stores made before `owner_scope` existed get the column (NULL: unknown scope).
        let has_scope: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name = 'owner_scope'",
                [],
                |r| r.get(0),
            )
            .map_err(wrap)?;
        if has_scope == 0 {
            conn.execute_batch("ALTER TABLE runs ADD COLUMN owner_scope TEXT")
                .map_err(wrap)?;
        }
        Ok(RunStore {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            redactor,
        })
    }

    /// The redactor everything written here goes through.
    pub fn redactor(&self) -> Redactor {
        self.redactor.clone()
    }

    /// An emitter for the stored run `run_id` (first event `seq` 1) that records into
    /// this store and redacts with its redactor.
    pub fn emitter(self: &Arc<Self>, run_id: impl Into<String>) -> Emitter {
        Emitter::new(run_id, Some(self.clone()), self.redactor())
    }

    /// Like [`RunStore::emitter`] for a run whose earlier events are stored: the next
    /// event continues after the last one.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn resuming_emitter(self: &Arc<Self>, run_id: &str) -> Result<Emitter, StoreError> {
        let next_seq = self.last_seq(run_id)? + 1;
        Ok(Emitter::resuming(
            run_id,
            next_seq,
            Some(self.clone()),
            self.redactor(),
        ))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sqlite(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut conn).map_err(|e| self.sqlite(e))
    }

    /// Records a new run and returns it. Its task and params are stored redacted by
    /// the store's redactor.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] (e.g. a duplicate id).
    pub fn create_run(&self, new: &NewRun) -> Result<RunRecord, StoreError> {
        let new = &new.redacted(&self.redactor);
        let id = new
            .id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let status = new.status.unwrap_or(RunStatus::Running);
        let params = serde_json::Value::Object(new.params.clone()).to_string();
        let created = now_text();
        // The owner is this process or one it speaks for, in this PID namespace.
        let scope = new.owner_pid.map(|_| boitata_tools::process::owner_scope());
        self.with_conn(|c| {
            c.execute(
                "INSERT INTO runs (id, blueprint, task, params, workspace, status, owner_pid, owner_scope, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![id, new.blueprint, new.task, params, new.workspace, status.as_str(), new.owner_pid, scope, created],
            )
        })?;
        self.run(&id)
    }

    /// The run with exactly this id.
    ///
    /// # Errors
    /// [`StoreError::NotFound`].
    pub fn run(&self, id: &str) -> Result<RunRecord, StoreError> {
        let row = self.with_conn(|c| {
            c.query_row(
                &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
                params![id],
                RawRun::from_row,
            )
            .optional()
        })?;
        row.ok_or_else(|| StoreError::NotFound(id.to_owned()))?
            .decode(&self.path)
    }

    /// The run whose id is `id_or_prefix` or uniquely starts with it.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Ambiguous`].
    pub fn find_run(&self, id_or_prefix: &str) -> Result<RunRecord, StoreError> {
        if id_or_prefix.is_empty() {
            return Err(StoreError::NotFound(String::new()));
        }
        if let Ok(run) = self.run(id_or_prefix) {
            return Ok(run);
        }
        // Compare the prefix as text (no LIKE: `%` and `_` are plain characters here).
        let len = id_or_prefix.chars().count() as i64;
        let (count, first) = self.with_conn(|c| {
            let count: i64 = c.query_row(
                "SELECT COUNT(*) FROM runs WHERE substr(id, 1, ?2) = ?1",
                params![id_or_prefix, len],
                |r| r.get(0),
            )?;
            let first = c
                .query_row(
                    &format!("SELECT {RUN_COLUMNS} FROM runs WHERE substr(id, 1, ?2) = ?1 LIMIT 1"),
                    params![id_or_prefix, len],
                    RawRun::from_row,
                )
                .optional()?;
            Ok((count, first))
        })?;
        match (count, first) {
            (1, Some(run)) => run.decode(&self.path),
            (0, _) | (_, None) => Err(StoreError::NotFound(id_or_prefix.to_owned())),
            (count, _) => Err(StoreError::Ambiguous {
                prefix: id_or_prefix.to_owned(),
                count: count as usize,
            }),
        }
    }

    /// The newest runs first, at most `limit`.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn list_runs(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        let rows = self.with_conn(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at DESC, id DESC LIMIT ?1"
            ))?;
            let rows = stmt.query_map(params![limit as i64], RawRun::from_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(|r| r.decode(&self.path)).collect()
    }

    /// Runs whose status is `queued` or `running`.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn live_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let rows = self.with_conn(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE status IN ('queued', 'running') ORDER BY created_at"
            ))?;
            let rows = stmt.query_map([], RawRun::from_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(|r| r.decode(&self.path)).collect()
    }

    /// Sets a run's status (and `finished_at` for a final one) without an event. Used
    /// for `queued` -> `running` hand-offs; final statuses normally come from
    /// appending `run_finished`.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Sqlite`].
    pub fn set_status(
        &self,
        id: &str,
        status: RunStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let finished = status.is_final().then(now_text);
        let error = error.map(|e| self.redactor.redact(e));
        let changed = self.with_conn(|c| {
            c.execute(
                "UPDATE runs SET status = ?2, error = COALESCE(?3, error), finished_at = COALESCE(?4, finished_at) WHERE id = ?1",
                params![id, status.as_str(), error, finished],
            )
        })?;
        if changed == 0 {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        Ok(())
    }

    /// Sets the process that executes a run.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn set_owner_pid(&self, id: &str, pid: u32) -> Result<(), StoreError> {
        self.with_conn(|c| {
            c.execute(
                "UPDATE runs SET owner_pid = ?2, owner_scope = ?3 WHERE id = ?1",
                params![id, pid, boitata_tools::process::owner_scope()],
            )
        })?;
        Ok(())
    }

    /// Appends one event (and applies `run_started` / `run_finished` to the run's row).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`]: e.g. a duplicate `seq`, or an unknown run.
    pub fn append_event(&self, event: &Event) -> Result<(), StoreError> {
        let body = event.to_json_line();
        let ts = event.ts.to_rfc3339_opts(SecondsFormat::Millis, true);
        self.with_conn(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO events (run_id, seq, ts, type, node, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![event.run_id, event.seq as i64, ts, event.payload.kind(), event.node, body],
            )?;
            match &event.payload {
                EventPayload::RunStarted { .. } => {
                    tx.execute(
                        "UPDATE runs SET status = 'running' WHERE id = ?1 AND status IN ('queued', 'running')",
                        params![event.run_id],
                    )?;
                }
                EventPayload::RunFinished { status, error } => {
                    tx.execute(
                        "UPDATE runs SET status = ?2, error = ?3, finished_at = ?4 WHERE id = ?1",
                        params![event.run_id, status.as_str(), error, ts],
                    )?;
                }
                _ => {}
            }
            tx.commit()
        })
    }

    /// A run's events with `seq > after_seq`, in order.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`], [`StoreError::Corrupt`].
    pub fn events(&self, run_id: &str, after_seq: u64) -> Result<Vec<Event>, StoreError> {
        let bodies = self.with_conn(|c| {
            let mut stmt =
                c.prepare("SELECT body FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq")?;
            let rows =
                stmt.query_map(params![run_id, after_seq as i64], |r| r.get::<_, String>(0))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        bodies
            .iter()
            .map(|b| {
                serde_json::from_str(b).map_err(|e| StoreError::Corrupt {
                    path: self.path.clone(),
                    message: e.to_string(),
                })
            })
            .collect()
    }

    /// The highest `seq` stored for a run (0 if none).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn last_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        let seq: Option<i64> = self.with_conn(|c| {
            c.query_row(
                "SELECT MAX(seq) FROM events WHERE run_id = ?1",
                params![run_id],
                |r| r.get(0),
            )
        })?;
        Ok(seq.unwrap_or(0).max(0) as u64)
    }
}

impl EventSink for RunStore {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        self.append_event(event).map_err(|e| SinkError {
            run_id: event.run_id.clone(),
            seq: event.seq,
            message: e.to_string(),
        })
    }
}

const RUN_COLUMNS: &str =
    "id, blueprint, task, params, workspace, status, error, owner_pid, created_at, finished_at, owner_scope";

struct RawRun {
    id: String,
    blueprint: Option<String>,
    task: String,
    params: String,
    workspace: Option<String>,
    status: String,
    error: Option<String>,
    owner_pid: Option<i64>,
    owner_scope: Option<String>,
    created_at: String,
    finished_at: Option<String>,
}

impl RawRun {
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(RawRun {
            id: row.get(0)?,
            blueprint: row.get(1)?,
            task: row.get(2)?,
            params: row.get(3)?,
            workspace: row.get(4)?,
            status: row.get(5)?,
            error: row.get(6)?,
            owner_pid: row.get(7)?,
            created_at: row.get(8)?,
            finished_at: row.get(9)?,
            owner_scope: row.get(10)?,
        })
    }

    fn decode(self, path: &Path) -> Result<RunRecord, StoreError> {
        let corrupt = |message: String| StoreError::Corrupt {
            path: path.to_path_buf(),
            message,
        };
        let status = RunStatus::parse(&self.status)
            .ok_or_else(|| corrupt(format!("run {}: unknown status {:?}", self.id, self.status)))?;
        let params = match serde_json::from_str::<serde_json::Value>(&self.params) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => {
                return Err(corrupt(format!(
                    "run {}: params are not a JSON object",
                    self.id
                )))
            }
        };
        let created_at = parse_ts(&self.created_at)
            .ok_or_else(|| corrupt(format!("run {}: bad created_at", self.id)))?;
        Ok(RunRecord {
            id: self.id,
            blueprint: self.blueprint,
            task: self.task,
            params,
            workspace: self.workspace,
            status,
            error: self.error,
            owner_pid: self.owner_pid.and_then(|p| u32::try_from(p).ok()),
            owner_scope: self.owner_scope,
            created_at,
            finished_at: self.finished_at.as_deref().and_then(parse_ts),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::event::Emitter;

    #[test]
    fn events_are_stored_in_order_and_drive_the_run_status() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RunStore::open(dir.path(), Redactor::default()).unwrap());
        let run = store
            .create_run(&NewRun {
                task: "t".into(),
                ..NewRun::default()
            })
            .unwrap();
        let emitter = Emitter::new(run.id.clone(), Some(store.clone()), Redactor::default());
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
        let plain = RunStore::open(dir.path(), Redactor::default()).unwrap();
        let run = plain.create_run(&new).unwrap();
        assert_eq!(run.task, "task [REDACTED] and hunter2-known-secret");
        assert_eq!(run.params["key"], "[REDACTED]");

        // With the caller's secrets.
        let known = Redactor::new(["hunter2-known-secret"]);
        let store = Arc::new(RunStore::open(dir.path(), known).unwrap());
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
    fn events_are_append_only_and_a_failed_write_is_not_shown() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RunStore::open(dir.path(), Redactor::default()).unwrap());
        let run = store.create_run(&NewRun::default()).unwrap();
        let emitter = Emitter::new(run.id, Some(store.clone()), Redactor::default());
        emitter
            .emit(None, EventPayload::AgentMessage { text: "x".into() })
            .unwrap();
        let err = store
            .with_conn(|c| c.execute("DELETE FROM events", []))
            .unwrap_err();
        assert!(err.to_string().contains("append-only"), "{err}");
        // An emitter for an unknown run cannot record, so it must not number the event.
        let orphan = Emitter::new("no-such-run", Some(store), Redactor::default());
        assert!(orphan
            .emit(None, EventPayload::AgentMessage { text: "x".into() })
            .is_err());
    }

    #[test]
    fn an_owner_is_gone_only_when_judged_in_its_own_scope() {
        let dir = tempfile::tempdir().unwrap();
        let store = RunStore::open(dir.path(), Redactor::default()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let gone = store
            .create_run(&NewRun {
                owner_pid: Some(dead),
                ..NewRun::default()
            })
            .unwrap();
        assert!(gone.owner_gone());
        let me = store
            .create_run(&NewRun {
                owner_pid: Some(std::process::id()),
                ..NewRun::default()
            })
            .unwrap();
        assert!(!me.owner_gone());
        // The same dead pid recorded in another PID namespace cannot be judged here.
        store
            .with_conn(|c| {
                c.execute(
                    "UPDATE runs SET owner_scope = 'vm pid:[1]' WHERE id = ?1",
                    params![gone.id],
                )
            })
            .unwrap();
        assert!(!store.run(&gone.id).unwrap().owner_gone());
        let unowned = store.create_run(&NewRun::default()).unwrap();
        assert!(!unowned.owner_gone());
    }
}
