//! [`SqliteStore`]: the [`RunStore`] in one SQLite file (`boitata.db` in the data dir),
//! shared safely by several processes (WAL, busy timeout).
//!
//! Events are append-only (triggers refuse `UPDATE` and `DELETE`), keyed by
//! `(run_id, seq)`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use boitata_protocol::redact::Redactor;
use boitata_protocol::{Event, EventPayload, RunStatus};
use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::{params, Connection, OptionalExtension};

use crate::{NewRun, RunRecord, RunStore, StoreError, DB_FILE};

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

/// The SQLite run store: one file, shared safely by several processes. Share it
/// behind an `Arc` (as `Arc<dyn RunStore>`).
#[derive(Debug)]
pub struct SqliteStore {
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

impl SqliteStore {
    /// Opens (creating if needed) `DIR/boitata.db`, redacting what is written with
    /// `redactor` (pass `boitata_core::config::Config::redactor`; the
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
    /// like [`SqliteStore::open`].
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
        Ok(SqliteStore {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            redactor,
        })
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
}

impl RunStore for SqliteStore {
    fn location(&self) -> PathBuf {
        self.path.clone()
    }

    fn redactor(&self) -> Redactor {
        self.redactor.clone()
    }

    fn create_run(&self, new: &NewRun) -> Result<RunRecord, StoreError> {
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

    fn run(&self, id: &str) -> Result<RunRecord, StoreError> {
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

    fn find_run(&self, id_or_prefix: &str) -> Result<RunRecord, StoreError> {
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

    fn list_runs(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        let rows = self.with_conn(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at DESC, id DESC LIMIT ?1"
            ))?;
            let rows = stmt.query_map(params![limit as i64], RawRun::from_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(|r| r.decode(&self.path)).collect()
    }

    fn live_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let rows = self.with_conn(|c| {
            let mut stmt = c.prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE status IN ('queued', 'running') ORDER BY created_at"
            ))?;
            let rows = stmt.query_map([], RawRun::from_row)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter().map(|r| r.decode(&self.path)).collect()
    }

    fn set_status(
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

    fn set_owner_pid(&self, id: &str, pid: u32) -> Result<(), StoreError> {
        self.with_conn(|c| {
            c.execute(
                "UPDATE runs SET owner_pid = ?2, owner_scope = ?3 WHERE id = ?1",
                params![id, pid, boitata_tools::process::owner_scope()],
            )
        })?;
        Ok(())
    }

    fn append_event(&self, event: &Event) -> Result<(), StoreError> {
        let body = event.to_json_line();
        let ts = event.ts.to_rfc3339_opts(SecondsFormat::Millis, true);
        let insert = |c: &Connection| {
            c.prepare_cached(
                "INSERT INTO events (run_id, seq, ts, type, node, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![event.run_id, event.seq as i64, ts, event.payload.kind(), event.node, body])
        };
        self.with_conn(|c| {
            match &event.payload {
                // The run's row changes with these: one transaction, so the row never
                // disagrees with the events.
                EventPayload::RunStarted { .. } => {
                    let tx = c.transaction()?;
                    insert(&tx)?;
                    tx.execute(
                        "UPDATE runs SET status = 'running' WHERE id = ?1 AND status IN ('queued', 'running')",
                        params![event.run_id],
                    )?;
                    tx.commit()
                }
                EventPayload::RunFinished { status, error } => {
                    let tx = c.transaction()?;
                    insert(&tx)?;
                    tx.execute(
                        "UPDATE runs SET status = ?2, error = ?3, finished_at = ?4 WHERE id = ?1",
                        params![event.run_id, status.as_str(), error, ts],
                    )?;
                    tx.commit()
                }
                // One statement is its own transaction.
                _ => insert(c).map(drop),
            }
        })
    }

    fn events(&self, run_id: &str, after_seq: u64) -> Result<Vec<Event>, StoreError> {
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

    fn last_seq(&self, run_id: &str) -> Result<u64, StoreError> {
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
    use super::*;

    #[test]
    fn an_owner_is_gone_only_when_judged_in_its_own_scope() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path(), Redactor::default()).unwrap();
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

    #[test]
    fn events_are_append_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path(), Redactor::default()).unwrap();
        let run = store.create_run(&NewRun::default()).unwrap();
        let event = Event {
            run_id: run.id.clone(),
            seq: 1,
            ts: Utc::now(),
            node: None,
            payload: EventPayload::AgentMessage { text: "x".into() },
        };
        store.append_event(&event).unwrap();
        let err = store
            .with_conn(|c| c.execute("DELETE FROM events", []))
            .unwrap_err();
        assert!(err.to_string().contains("append-only"), "{err}");
        let err = store.append_event(&event).unwrap_err();
        assert!(
            err.to_string().contains("UNIQUE"),
            "a seq is stored once: {err}"
        );
        assert_eq!(store.events(&run.id, 0).unwrap().len(), 1);
    }
}
