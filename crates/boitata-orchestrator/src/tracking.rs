//! Per-run sandbox tracking with guaranteed teardown.
//!
//! [`RunSandboxes`] provisions a run's sandboxes and remembers them; its
//! [`teardown`](RunSandboxes::teardown) destroys all of them, whatever the way the run
//! ended. Provisioning runs in its own task, so a node cancelled (or panicking) in the
//! middle of a provision cannot leave behind a container nobody knows about: teardown
//! waits for provisions in flight, then destroys what they made, then every sandbox
//! still labelled with the run's id.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use boitata_core::{Emitter, EventPayload};
use tokio_util::task::TaskTracker;

use crate::sandbox::{Sandbox, SandboxError, SandboxId, SandboxSpec, LABEL_RUN_ID};

/// The sandboxes of one run. Cheap to clone; clones share the record.
#[derive(Clone)]
pub struct RunSandboxes {
    backend: Arc<dyn Sandbox>,
    run_id: String,
    emitter: Emitter,
    state: Arc<Mutex<TrackState>>,
    in_flight: TaskTracker,
}

#[derive(Default)]
struct TrackState {
    /// Provisioned and not yet destroyed, with the node that asked.
    live: Vec<(SandboxId, Option<String>)>,
    /// Set by teardown: later provisions are refused.
    ended: bool,
    /// Whether a provision was ever asked for (if not, teardown never touches the
    /// backend: a run without sandboxes works without a daemon).
    attempted: bool,
}

impl std::fmt::Debug for RunSandboxes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSandboxes")
            .field("backend", &self.backend.backend_name())
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// What [`RunSandboxes::teardown`] did.
#[derive(Debug, Default)]
pub struct TeardownReport {
    /// Sandboxes destroyed.
    pub destroyed: Vec<SandboxId>,
    /// Sandboxes that could not be destroyed (the reaper will find them), with why.
    pub failed: Vec<(SandboxId, SandboxError)>,
}

impl RunSandboxes {
    /// Tracks the sandboxes of run `emitter.run_id()` on `backend`; events
    /// (`sandbox_provisioned`, `sandbox_destroyed`) go to `emitter`.
    pub fn new(backend: Arc<dyn Sandbox>, emitter: Emitter) -> Self {
        RunSandboxes {
            backend,
            run_id: emitter.run_id().to_owned(),
            emitter,
            state: Arc::new(Mutex::new(TrackState::default())),
            in_flight: TaskTracker::new(),
        }
    }

    /// The backend sandboxes are made on.
    pub fn backend(&self) -> &Arc<dyn Sandbox> {
        &self.backend
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Provisions a sandbox for `node` from `spec` (its `run_id` and `node` are set
    /// from the run and `node`), records it, and emits `sandbox_provisioned`.
    ///
    /// The provision runs to completion in its own task even if this future is
    /// dropped; what it makes is destroyed by [`RunSandboxes::teardown`].
    ///
    /// # Errors
    /// The backend's [`SandboxError`]; [`SandboxError::RunEnded`] once teardown began.
    pub async fn provision(
        &self,
        node: Option<&str>,
        mut spec: SandboxSpec,
    ) -> Result<SandboxId, SandboxError> {
        spec.run_id = self.run_id.clone();
        spec.node = node.map(str::to_owned);
        {
            let mut state = self.lock();
            if state.ended {
                return Err(ended_error(&self.run_id));
            }
            state.attempted = true;
        }
        let this = self.clone();
        let node = spec.node.clone();
        let task = self.in_flight.spawn(async move {
            let id = this.backend.provision(&spec).await?;
            let ended = {
                let mut state = this.lock();
                if !state.ended {
                    state.live.push((id.clone(), node.clone()));
                }
                state.ended
            };
            if ended {
                // Teardown started while this was being made: do not leak it.
                if let Err(e) = this.backend.destroy(&id).await {
                    tracing::warn!(sandbox = %id.short(), "destroying a sandbox made during teardown: {e}");
                }
                return Err(ended_error(&this.run_id));
            }
            this.emitter.emit_or_log(
                node.as_deref(),
                EventPayload::SandboxProvisioned {
                    sandbox_id: id.to_string(),
                    backend: this.backend.backend_name().to_owned(),
                    image: spec.image.clone(),
                },
            );
            Ok(id)
        });
        match task.await {
            Ok(result) => result,
            Err(join) => Err(SandboxError::Backend {
                backend: self.backend.backend_name(),
                operation: "provision",
                source: Box::new(join),
            }),
        }
    }

    /// The sandboxes provisioned and not yet destroyed.
    pub fn live(&self) -> Vec<SandboxId> {
        self.lock().live.iter().map(|(id, _)| id.clone()).collect()
    }

    /// Destroys every sandbox of the run and emits `sandbox_destroyed` for each one
    /// this tracker made. Refuses later provisions, waits for those in flight, then
    /// also destroys any other sandbox labelled with the run's id. Safe to call more
    /// than once.
    pub async fn teardown(&self) -> TeardownReport {
        let attempted = {
            let mut state = self.lock();
            state.ended = true;
            state.attempted
        };
        if !attempted {
            return TeardownReport::default();
        }
        self.in_flight.close();
        self.in_flight.wait().await;
        let tracked = std::mem::take(&mut self.lock().live);

        let mut report = TeardownReport::default();
        let destroys = tracked.iter().map(|(id, _)| self.backend.destroy(id));
        let results = futures::future::join_all(destroys).await;
        for ((id, node), result) in tracked.into_iter().zip(results) {
            match result {
                Ok(()) => {
                    self.emitter.emit_or_log(
                        node.as_deref(),
                        EventPayload::SandboxDestroyed {
                            sandbox_id: id.to_string(),
                        },
                    );
                    report.destroyed.push(id);
                }
                Err(e) => {
                    tracing::warn!(sandbox = %id.short(), "teardown could not destroy sandbox: {e}");
                    report.failed.push((id, e));
                }
            }
        }

        // Belt and braces: anything else labelled with this run (made by a provision
        // whose result was lost) goes too.
        let labels = BTreeMap::from([(LABEL_RUN_ID.to_owned(), self.run_id.clone())]);
        match self.backend.list(&labels).await {
            Ok(stray) => {
                for info in stray {
                    if report.destroyed.contains(&info.id) {
                        continue;
                    }
                    match self.backend.destroy(&info.id).await {
                        Ok(()) => {
                            self.emitter.emit_or_log(
                                info.node(),
                                EventPayload::SandboxDestroyed {
                                    sandbox_id: info.id.to_string(),
                                },
                            );
                            report.destroyed.push(info.id);
                        }
                        Err(e) => report.failed.push((info.id, e)),
                    }
                }
            }
            Err(e) => tracing::warn!("teardown could not list the run's sandboxes: {e}"),
        }
        report
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TrackState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn ended_error(run_id: &str) -> SandboxError {
    SandboxError::RunEnded {
        run_id: run_id.to_owned(),
    }
}
