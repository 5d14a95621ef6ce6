//! Start-up recovery: runs a previous server process left `queued` or `running`.
//!
//! A run whose owner process is gone (killed, crashed, the machine restarted) will
//! never finish by itself. At start the server appends a `run_finished` event to each
//! such run, status `failed`, error `interrupted: …`, which also sets the run's row;
//! every event stored before is kept (the event log is append-only). Runs whose owner
//! process is still alive (a local `boitata run` sharing the data dir) are left alone.
//! The owner is gone when its pid is not a live process on this machine, or is this
//! very process (a container's server is often pid 1 on every start).

use std::collections::HashSet;
use std::sync::Arc;

use boitata_core::store::{RunEmitters, RunRecord, RunStore, StoreError};
use boitata_core::{EventPayload, RunStatus};

/// What [`recover_interrupted`] found.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Runs marked `failed` (interrupted), as they were before.
    pub interrupted: Vec<RunRecord>,
    /// Runs left alone because their owner process is alive.
    pub live_elsewhere: Vec<RunRecord>,
}

impl Recovery {
    /// The ids of the interrupted runs.
    pub fn interrupted_ids(&self) -> HashSet<String> {
        self.interrupted.iter().map(|r| r.id.clone()).collect()
    }

    /// The ids of the runs left alone.
    pub fn live_ids(&self) -> HashSet<String> {
        self.live_elsewhere.iter().map(|r| r.id.clone()).collect()
    }
}

/// Marks every `queued` or `running` run whose owner process is gone as `failed`
/// (interrupted), with a `run_finished` event saying so (redacted by the store's
/// redactor, like every event).
///
/// # Errors
/// [`StoreError`] when the store cannot be read or written.
pub fn recover_interrupted(store: &Arc<dyn RunStore>) -> Result<Recovery, StoreError> {
    let mut recovery = Recovery::default();
    for run in store.live_runs()? {
        // A pid recorded in another host or PID namespace cannot be judged from here.
        let elsewhere = run
            .owner_scope
            .as_deref()
            .is_some_and(|scope| scope != boitata_tools::process::owner_scope());
        if elsewhere || run.owner_pid.is_some_and(owner_alive) {
            recovery.live_elsewhere.push(run);
            continue;
        }
        let emitter = store.resuming_emitter(&run.id)?;
        let owner = run.owner_pid.map_or_else(
            || "an unknown process".to_owned(),
            |pid| format!("process {pid}"),
        );
        let error = format!(
            "interrupted: the server ({owner}) stopped while the run was {}; it was marked failed when the server started again",
            run.status
        );
        emitter
            .emit(
                None,
                EventPayload::RunFinished {
                    status: RunStatus::Failed,
                    error: Some(error),
                },
            )
            .map_err(|e| StoreError::Corrupt {
                path: store.location(),
                message: e.to_string(),
            })?;
        recovery.interrupted.push(run);
    }
    Ok(recovery)
}

/// Whether `pid` is a live process on this machine, other than this one.
fn owner_alive(pid: u32) -> bool {
    pid != std::process::id() && boitata_tools::process::pid_alive(pid, None)
}

#[cfg(test)]
mod tests {
    use boitata_core::store::{NewRun, SqliteStore};
    use boitata_core::Redactor;

    use super::*;

    #[test]
    fn dead_owners_runs_fail_and_keep_their_events() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn RunStore> =
            Arc::new(SqliteStore::open(dir.path(), Redactor::default()).unwrap());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        let orphan = store
            .create_run(&NewRun {
                task: "t".into(),
                owner_pid: Some(dead_pid),
                ..NewRun::default()
            })
            .unwrap();
        let emitter = store.emitter(orphan.id.clone());
        emitter
            .emit(
                None,
                EventPayload::AgentMessage {
                    text: "before".into(),
                },
            )
            .unwrap();
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let alive = store
            .create_run(&NewRun {
                task: "t".into(),
                owner_pid: Some(sleeper.id()),
                ..NewRun::default()
            })
            .unwrap();

        let recovery = recover_interrupted(&store).unwrap();
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();

        assert_eq!(
            recovery.interrupted_ids(),
            HashSet::from([orphan.id.clone()])
        );
        assert_eq!(recovery.live_ids(), HashSet::from([alive.id.clone()]));
        let after = store.run(&orphan.id).unwrap();
        assert_eq!(after.status, RunStatus::Failed);
        assert!(after.error.unwrap().starts_with("interrupted"));
        let events = store.events(&orphan.id, 0).unwrap();
        assert_eq!(events.len(), 2);
        assert!(matches!(
            events[1].payload,
            EventPayload::RunFinished { .. }
        ));
        assert_eq!(store.run(&alive.id).unwrap().status, RunStatus::Running);
    }
}
