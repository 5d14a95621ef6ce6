//! The orphan reaper: removes sandboxes whose run is no longer live.
//!
//! A run's sandboxes are destroyed when it ends (see [`crate::tracking`]); the reaper
//! is for the cases where that could not happen: the process was killed with SIGKILL,
//! the machine lost power, the daemon was down at teardown. It looks only at
//! sandboxes labelled [`LABEL_CREATED_BY`](crate::sandbox::LABEL_CREATED_BY)`=boitata`
//! and asks the caller which are live; [`judge`] is the usual answer, from the run
//! store's status of the sandbox's run and whether the process that made it is alive.

use std::collections::{BTreeMap, HashSet};

use boitata_core::RunStatus;
use serde::Serialize;

use crate::sandbox::{Sandbox, SandboxError, SandboxInfo, LABEL_HOST, LABEL_PID, LABEL_PID_START};

/// What a [`gc`] pass did.
#[derive(Debug, Default)]
pub struct GcReport {
    /// Sandboxes destroyed because their run was not live.
    pub removed: Vec<SandboxInfo>,
    /// Sandboxes left alone because their run is live.
    pub kept: Vec<SandboxInfo>,
    /// Sandboxes that should have been destroyed but could not be, with why.
    pub failed: Vec<(SandboxInfo, SandboxError)>,
}

/// Destroys every Boitata sandbox whose run id (label `boitata.run_id`) is not in
/// `live_run_ids`. A sandbox without a run id label is an orphan too.
///
/// # Errors
/// [`SandboxError`] if the sandboxes cannot be listed; failures to destroy single
/// sandboxes are reported in [`GcReport::failed`] instead.
pub async fn gc(
    backend: &dyn Sandbox,
    live_run_ids: &HashSet<String>,
) -> Result<GcReport, SandboxError> {
    gc_where(backend, |info| {
        info.run_id().is_some_and(|run| live_run_ids.contains(run))
    })
    .await
}

/// Destroys every Boitata sandbox for which `is_live` returns false.
///
/// # Errors
/// As [`gc`].
pub async fn gc_where(
    backend: &dyn Sandbox,
    is_live: impl Fn(&SandboxInfo) -> bool,
) -> Result<GcReport, SandboxError> {
    let mut report = GcReport::default();
    for info in backend.list(&BTreeMap::new()).await? {
        if is_live(&info) {
            report.kept.push(info);
            continue;
        }
        match backend.destroy(&info.id).await {
            Ok(()) => {
                tracing::info!(sandbox = %info.id.short(), run = ?info.run_id(), "reaped orphan sandbox");
                report.removed.push(info);
            }
            Err(e) => report.failed.push((info, e)),
        }
    }
    Ok(report)
}

/// Whether the process that provisioned `info` is still running, judged from its
/// `boitata.pid`, `boitata.pid_start` and `boitata.host` labels: `Some(true)` or
/// `Some(false)` when it was made on this machine, `None` when that cannot be told
/// (made elsewhere, or unlabelled).
pub fn owner_process_alive(info: &SandboxInfo) -> Option<bool> {
    let host = info.labels.get(LABEL_HOST)?;
    if *host != boitata_tools::process::owner_scope() {
        return None;
    }
    let pid: u32 = info.labels.get(LABEL_PID)?.parse().ok()?;
    let started = info
        .labels
        .get(LABEL_PID_START)
        .and_then(|s| s.parse().ok());
    Some(boitata_tools::process::pid_alive(pid, started))
}

/// A sandbox's standing, as [`judge`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Its run is in progress and its owner is running: keep it.
    Live,
    /// Its owner process is gone, or its run has finished: reap it.
    Orphan,
    /// Made on another machine by a run this store does not know: leave it to that
    /// machine's reaper.
    Unknown,
}

/// Judges a sandbox from the status of its run in the caller's run store
/// (`run_status`: `None` when the store has no such run) and from its owner process:
///
/// - owner process on this machine and dead (a SIGKILL, a crash): orphan, even when the
///   store still says `running`;
/// - otherwise, a run the store knows: live while `queued`/`running`, orphan after;
/// - a run the store does not know: live if its owner is alive here (another store's
///   run, e.g. the server's), unknown if it was made elsewhere.
pub fn judge(info: &SandboxInfo, run_status: Option<RunStatus>) -> Standing {
    match (owner_process_alive(info), run_status) {
        (Some(false), _) => Standing::Orphan,
        (_, Some(status)) if status.is_final() => Standing::Orphan,
        (_, Some(_)) => Standing::Live,
        (Some(true), None) => Standing::Live,
        (None, None) => Standing::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{SandboxId, LABEL_RUN_ID};

    fn info(pid: u32, start: Option<u64>, host: &str) -> SandboxInfo {
        let mut labels = BTreeMap::from([
            (LABEL_RUN_ID.to_owned(), "r".to_owned()),
            (LABEL_PID.to_owned(), pid.to_string()),
            (LABEL_HOST.to_owned(), host.to_owned()),
        ]);
        if let Some(start) = start {
            labels.insert(LABEL_PID_START.to_owned(), start.to_string());
        }
        SandboxInfo {
            id: SandboxId::new("c"),
            name: "n".into(),
            image: "i".into(),
            state: "running".into(),
            labels,
        }
    }

    #[test]
    fn a_dead_owner_makes_an_orphan_whatever_the_store_says() {
        let here = boitata_tools::process::owner_scope();
        let me = std::process::id();
        let started = boitata_tools::process::start_time(me);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();

        let live = info(me, started, &here);
        assert_eq!(judge(&live, Some(RunStatus::Running)), Standing::Live);
        assert_eq!(judge(&live, Some(RunStatus::Succeeded)), Standing::Orphan);
        assert_eq!(judge(&live, None), Standing::Live);

        let killed = info(dead, None, &here);
        assert_eq!(judge(&killed, Some(RunStatus::Running)), Standing::Orphan);
        let reused = info(me, started.map(|s| s + 1), &here);
        assert_eq!(judge(&reused, Some(RunStatus::Running)), Standing::Orphan);

        let elsewhere = info(me, started, "another-machine");
        assert_eq!(judge(&elsewhere, None), Standing::Unknown);
        assert_eq!(judge(&elsewhere, Some(RunStatus::Running)), Standing::Live);
        assert_eq!(judge(&elsewhere, Some(RunStatus::Failed)), Standing::Orphan);
    }
}
