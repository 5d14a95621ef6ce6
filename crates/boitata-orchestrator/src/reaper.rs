//! The orphan reaper: removes sandboxes whose run is no longer live, then run networks
//! and host rules whose run is no longer live ([`gc_networks_where`]).
//!
//! A run's sandboxes are destroyed when it ends (see [`crate::tracking`]); the reaper
//! is for the cases where that could not happen: the process was killed with SIGKILL,
//! the machine lost power, the daemon was down at teardown. It looks only at
//! sandboxes labelled [`LABEL_CREATED_BY`](crate::sandbox::LABEL_CREATED_BY)`=boitata`
//! and asks the caller which are live; [`judge`] is the usual answer, from the run
//! store's status of the sandbox's run and whether the process that made it is alive.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use boitata_core::RunStatus;
use serde::Serialize;

use crate::network::firewall::rule_comment;
use crate::network::Firewall;
use crate::sandbox::{
    RunNetworkInfo, Sandbox, SandboxError, SandboxInfo, LABEL_HOST, LABEL_PID, LABEL_PID_START,
};

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
    owner_alive(&info.labels)
}

/// [`owner_process_alive`] from the labels of a sandbox or a run network.
fn owner_alive(labels: &BTreeMap<String, String>) -> Option<bool> {
    let host = labels.get(LABEL_HOST)?;
    if *host != boitata_tools::process::owner_scope() {
        return None;
    }
    let pid: u32 = labels.get(LABEL_PID)?.parse().ok()?;
    let started = labels.get(LABEL_PID_START).and_then(|s| s.parse().ok());
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
    judge_labels(&info.labels, run_status)
}

/// [`judge`] for anything labelled like a sandbox (a run network).
pub fn judge_labels(labels: &BTreeMap<String, String>, run_status: Option<RunStatus>) -> Standing {
    match (owner_alive(labels), run_status) {
        (Some(false), _) => Standing::Orphan,
        (_, Some(status)) if status.is_final() => Standing::Orphan,
        (_, Some(_)) => Standing::Live,
        (Some(true), None) => Standing::Live,
        (None, None) => Standing::Unknown,
    }
}

/// What a [`gc_networks_where`] pass did.
#[derive(Debug, Default)]
pub struct NetworkGcReport {
    /// Run networks removed (with their host rules) because their run was not live.
    pub removed: Vec<RunNetworkInfo>,
    /// Run networks left alone because their run is live.
    pub kept: Vec<RunNetworkInfo>,
    /// Runs whose host rules were removed though their network was already gone.
    pub stray_rules_removed: Vec<String>,
    /// What could not be removed (a network's name, or `host rules of RUN`), with why.
    pub failed: Vec<(String, SandboxError)>,
}

/// Removes every run network for which `is_live` returns false, with its host
/// rules, then the host rules of runs that have no network left. Run it after the
/// sandboxes' pass ([`gc_where`]): a network still holding a sandbox loses it.
///
/// # Errors
/// [`SandboxError`] if the networks cannot be listed; single failures (a rule or a
/// network that cannot be removed, no `iptables` here) are in
/// [`NetworkGcReport::failed`].
pub async fn gc_networks_where(
    backend: &dyn Sandbox,
    is_live: impl Fn(&RunNetworkInfo) -> bool,
) -> Result<NetworkGcReport, SandboxError> {
    let mut report = NetworkGcReport::default();
    let networks = backend.list_run_networks().await?;
    let firewall = Firewall::detect().await;
    let rules_error = |run: &str, message: String| {
        (
            format!("host rules of run {run}"),
            SandboxError::Isolation {
                run_id: run.to_owned(),
                message,
            },
        )
    };
    for network in networks {
        if is_live(&network) {
            report.kept.push(network);
            continue;
        }
        if let (Some(run), Ok(firewall)) = (network.run_id(), &firewall) {
            if let Err(e) = firewall.remove_run(run).await {
                report.failed.push(rules_error(run, e.to_string()));
            }
        }
        match backend.remove_run_network(&network.name).await {
            Ok(()) => {
                tracing::info!(network = %network.name, "reaped orphan run network");
                report.removed.push(network);
            }
            Err(e) => report.failed.push((network.name.clone(), e)),
        }
    }
    let firewall = match firewall {
        Ok(firewall) => firewall,
        Err(e) => {
            report.failed.push(rules_error("-", e.to_string()));
            return Ok(report);
        }
    };
    match firewall.runs_with_rules().await {
        Ok(runs) => {
            // Listed again after the rules: a run's rules are set only after its
            // network is made, so rules without a network now are strays (and a run
            // starting meanwhile is not taken for one; see `RunNetwork::create`).
            let networked: BTreeSet<String> = backend
                .list_run_networks()
                .await?
                .iter()
                .filter_map(|n| n.run_id())
                .map(rule_comment)
                .collect();
            for run in runs {
                if networked.contains(&rule_comment(&run)) {
                    continue;
                }
                match firewall.remove_run(&run).await {
                    Ok(_) => report.stray_rules_removed.push(run),
                    Err(e) => report.failed.push(rules_error(&run, e.to_string())),
                }
            }
        }
        Err(e) => report.failed.push(rules_error("-", e.to_string())),
    }
    Ok(report)
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
