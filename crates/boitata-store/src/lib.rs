//! The run store: runs, their events and their owners, behind one [`RunStore`] trait.
//!
//! [`SqliteStore`] keeps them in one SQLite file (`boitata.db` in the data dir), shared
//! safely by several processes; a Postgres implementation for several servers will
//! fill the same trait. Appending a `run_started` event marks the run `running`;
//! appending `run_finished` sets its final status, error and `finished_at`, in the same
//! transaction, so a run's row never disagrees with its events.
//!
//! A store is opened with the run's [`Redactor`] (`boitata_core::config::Config::redactor`),
//! and redacts a run's task, params and error itself; its events are redacted by the
//! emitters `boitata_core::store::RunEmitters` makes on it. The CLI, the server and its
//! recovery all write this way, so none of them can store what another would hide.
//!
//! It does not own how events are made (the emitter: `boitata-core`) or served (SSE:
//! `boitata-server`).
//!
//! # Example
//!
//! ```no_run
//! # fn main() -> Result<(), boitata_store::StoreError> {
//! use boitata_protocol::redact::Redactor;
//! use boitata_store::{NewRun, RunStore, SqliteStore};
//!
//! let store = SqliteStore::open(std::path::Path::new("/tmp/boitata-data"), Redactor::default())?;
//! let run = store.create_run(&NewRun { task: "fix the tests".into(), ..NewRun::default() })?;
//! for event in store.events(&run.id, 0)? {
//!     println!("{}", event.to_json_line());
//! }
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

mod sqlite;

use std::path::PathBuf;

use boitata_protocol::event::visit_json_text_mut;
use boitata_protocol::redact::Redactor;
use boitata_protocol::{Event, RunStatus};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use sqlite::SqliteStore;

/// The database file name inside the data dir.
pub const DB_FILE: &str = "boitata.db";

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
        pid != std::process::id() && !boitata_tools::process::pid_alive(pid, None)
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
    pub(crate) fn redacted(&self, redactor: &Redactor) -> NewRun {
        let params = self
            .params
            .iter()
            .map(|(name, value)| {
                let mut value = value.clone();
                visit_json_text_mut(&mut value, &mut |text| *text = redactor.redact(text));
                (name.clone(), value)
            })
            .collect();
        NewRun {
            task: redactor.redact(&self.task),
            params,
            ..self.clone()
        }
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

/// Where runs and their events are kept: the one interface the CLI, the server and its
/// recovery write through. [`SqliteStore`] implements it; a Postgres store for several
/// servers will implement it too.
///
/// Implementations redact what they store with their [`Redactor`] (a run's task,
/// params and error); events arrive already redacted by the emitter that numbered them.
pub trait RunStore: Send + Sync + std::fmt::Debug {
    /// Where the runs are kept, for messages: the SQLite file's path.
    fn location(&self) -> PathBuf;

    /// The redactor everything written here goes through.
    fn redactor(&self) -> Redactor;

    /// Records a new run and returns it. Its task and params are stored redacted by
    /// the store's redactor.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] (e.g. a duplicate id).
    fn create_run(&self, new: &NewRun) -> Result<RunRecord, StoreError>;

    /// The run with exactly this id.
    ///
    /// # Errors
    /// [`StoreError::NotFound`].
    fn run(&self, id: &str) -> Result<RunRecord, StoreError>;

    /// The run whose id is `id_or_prefix` or uniquely starts with it.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Ambiguous`].
    fn find_run(&self, id_or_prefix: &str) -> Result<RunRecord, StoreError>;

    /// The newest runs first, at most `limit`.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    fn list_runs(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError>;

    /// Runs whose status is `queued` or `running`.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    fn live_runs(&self) -> Result<Vec<RunRecord>, StoreError>;

    /// Sets a run's status (and `finished_at` for a final one) without an event. Used
    /// for `queued` -> `running` hand-offs; final statuses normally come from
    /// appending `run_finished`.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Sqlite`].
    fn set_status(
        &self,
        id: &str,
        status: RunStatus,
        error: Option<&str>,
    ) -> Result<(), StoreError>;

    /// Sets the process that executes a run.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    fn set_owner_pid(&self, id: &str, pid: u32) -> Result<(), StoreError>;

    /// Appends one event (and applies `run_started` / `run_finished` to the run's row).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`]: e.g. a duplicate `seq`, or an unknown run.
    fn append_event(&self, event: &Event) -> Result<(), StoreError>;

    /// A run's events with `seq > after_seq`, in order.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`], [`StoreError::Corrupt`].
    fn events(&self, run_id: &str, after_seq: u64) -> Result<Vec<Event>, StoreError>;

    /// The highest `seq` stored for a run (0 if none).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    fn last_seq(&self, run_id: &str) -> Result<u64, StoreError>;
}
