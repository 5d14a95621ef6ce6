//! The orphan reaper: removes sandboxes whose run is no longer live.
//!
//! A run's sandboxes are destroyed when it ends (see [`crate::tracking`]); the reaper
//! is for the cases where that could not happen: the process was killed with SIGKILL,
//! the machine lost power, the daemon was down at teardown. It looks only at
//! sandboxes labelled [`LABEL_CREATED_BY`](crate::sandbox::LABEL_CREATED_BY)`=boitata`
//! and asks the caller which runs are live (the caller owns the run store).

use std::collections::{BTreeMap, HashSet};

use crate::sandbox::{Sandbox, SandboxError, SandboxInfo, LABEL_HOST, LABEL_PID};

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
/// `boitata.pid` and `boitata.host` labels: `Some(true)` or `Some(false)` when it was
/// made on this machine, `None` when that cannot be told (made elsewhere, or
/// unlabelled).
///
/// A run left `running` in the store by a process killed with SIGKILL has a dead
/// owner; callers should treat such a run as not live.
pub fn owner_process_alive(info: &SandboxInfo) -> Option<bool> {
    let host = info.labels.get(LABEL_HOST)?;
    if *host != crate::sandbox::docker::this_host_name() {
        return None;
    }
    let pid: u32 = info.labels.get(LABEL_PID)?.parse().ok()?;
    Some(process_alive(pid))
}

/// Whether a process with this pid exists on this machine and is not a zombie.
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_finished_child_is_not() {
        assert!(process_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_alive(pid));
    }
}
