//! Runs in the server process: accepted, queued, executed a few at a time, cancelled.
//!
//! [`Scheduler::submit`] records a run as `queued` and spawns its task, which waits
//! for one of `max_concurrent_runs` slots, then walks the blueprint with the same
//! [`Executor`] the CLI uses, in a fresh workspace directory
//! (`DATA_DIR/workspaces/RUN_ID`). Every event goes through the run's [`Emitter`]: the
//! store records it first, then the run's broadcast channel hands it to live
//! subscribers (see [`crate::sse`]). A run cancelled while queued ends `cancelled`
//! without starting. Shutting down cancels every live run and waits for them to end,
//! so their cleanup (sandbox teardown) runs.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boitata_blueprint::{Blueprint, Executor, RunRequest, RuntimeSource};
use boitata_core::event::SinkError;
use boitata_core::store::{NewRun, RunEmitters, RunRecord, RunStore};
use boitata_core::{Event, EventPayload, EventSink, RunStatus};
use futures::FutureExt;
use tokio::sync::{broadcast, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::AppError;

/// How many events a live subscriber may fall behind before it re-reads from the
/// store (it then loses nothing; it only pays a store read).
pub(crate) const LIVE_CHANNEL_CAPACITY: usize = 4096;

/// An event as live subscribers get it: already serialized, once for all of them.
#[derive(Debug)]
pub(crate) struct LiveEvent {
    /// The event's `seq`.
    pub(crate) seq: u64,
    /// The event as one line of JSON.
    pub(crate) json: String,
    /// Whether it is the run's `run_finished`.
    pub(crate) finished: bool,
}

impl LiveEvent {
    pub(crate) fn new(event: &Event) -> Self {
        LiveEvent {
            seq: event.seq,
            json: event.to_json_line(),
            finished: matches!(event.payload, EventPayload::RunFinished { .. }),
        }
    }
}

/// The emitter's observer that feeds a run's broadcast channel.
struct BroadcastSink(broadcast::Sender<Arc<LiveEvent>>);

impl EventSink for BroadcastSink {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        if self.0.receiver_count() > 0 {
            // No receiver left between the check and the send is fine: nobody missed it.
            let _ = self.0.send(Arc::new(LiveEvent::new(event)));
        }
        Ok(())
    }
}

/// A run this process executes (queued or running).
struct LiveRun {
    cancel: CancellationToken,
    events: broadcast::Sender<Arc<LiveEvent>>,
}

/// What a [`Scheduler`] needs.
pub(crate) struct SchedulerParts {
    pub(crate) store: Arc<dyn RunStore>,
    pub(crate) executor: Executor,
    pub(crate) runtime: RuntimeSource,
    pub(crate) workspaces_dir: PathBuf,
    pub(crate) max_concurrent_runs: usize,
}

/// Accepts, queues, executes and cancels runs. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Scheduler {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn RunStore>,
    executor: Executor,
    runtime: RuntimeSource,
    workspaces_dir: PathBuf,
    slots: Arc<Semaphore>,
    live: Mutex<HashMap<String, LiveRun>>,
    tasks: TaskTracker,
    closing: CancellationToken,
}

impl Scheduler {
    pub(crate) fn new(parts: SchedulerParts) -> Self {
        Scheduler {
            inner: Arc::new(Inner {
                store: parts.store,
                executor: parts.executor,
                runtime: parts.runtime,
                workspaces_dir: parts.workspaces_dir,
                slots: Arc::new(Semaphore::new(parts.max_concurrent_runs.max(1))),
                live: Mutex::new(HashMap::new()),
                tasks: TaskTracker::new(),
                closing: CancellationToken::new(),
            }),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, LiveRun>> {
        self.inner.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks `params` against the blueprint, records a `queued` run and starts its
    /// task. Returns the run as recorded.
    ///
    /// # Errors
    /// [`AppError::Unprocessable`] when the params are wrong, a node has no handler
    /// here, or the blueprint has agent nodes and the server's provider cannot be built
    /// (no key; nothing is recorded then); [`AppError::Unavailable`] while shutting down;
    /// [`AppError::Internal`] when the store fails.
    pub(crate) async fn submit(
        &self,
        blueprint: Arc<Blueprint>,
        task: String,
        params: BTreeMap<String, String>,
    ) -> Result<RunRecord, AppError> {
        if self.inner.closing.is_cancelled() {
            return Err(AppError::Unavailable(
                "the server is shutting down".to_owned(),
            ));
        }
        self.inner
            .executor
            .check(&blueprint)
            .map_err(|e| AppError::Unprocessable(e.to_string()))?;
        boitata_blueprint::params::resolve(&blueprint, &params)
            .map_err(|e| AppError::Unprocessable(e.to_string()))?;
        // No key in the server's environment, say: refuse now, recording nothing,
        // rather than accept a run that can only fail.
        boitata_blueprint::check_provider(&blueprint, &self.inner.runtime).map_err(|problem| {
            AppError::Unprocessable(format!("{problem} (in the server's environment)"))
        })?;

        let id = new_run_id();
        let workspace = self.inner.workspaces_dir.join(&id);
        let new = NewRun {
            id: Some(id.clone()),
            blueprint: Some(blueprint.name.clone()),
            task: task.clone(),
            params: params
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
            workspace: Some(workspace.display().to_string()),
            status: Some(RunStatus::Queued),
            owner_pid: Some(std::process::id()),
        };
        let store = self.inner.store.clone();
        let record = tokio::task::spawn_blocking(move || store.create_run(&new)).await??;

        let (sender, _) = broadcast::channel(LIVE_CHANNEL_CAPACITY);
        let emitter = self.inner.store.emitter(id.clone());
        emitter.observe(Arc::new(BroadcastSink(sender.clone())));
        let cancel = CancellationToken::new();
        self.live().insert(
            id.clone(),
            LiveRun {
                cancel: cancel.clone(),
                events: sender,
            },
        );
        let this = self.clone();
        self.inner.tasks.spawn(async move {
            let request = RunRequest {
                task,
                params,
                workspace,
                runtime: this.inner.runtime.clone(),
                emitter: emitter.clone(),
                cancel,
            };
            let outcome = AssertUnwindSafe(this.execute(&blueprint, request))
                .catch_unwind()
                .await;
            if outcome.is_err() {
                tracing::error!(run = %id, "the run's task panicked");
                emitter.emit_or_log(
                    None,
                    EventPayload::RunFinished {
                        status: RunStatus::Failed,
                        error: Some(
                            "internal error: the run's task panicked (see the server log)"
                                .to_owned(),
                        ),
                    },
                );
            }
            this.live().remove(&id);
        });
        Ok(record)
    }

    /// Waits for a slot, then runs the blueprint to its end.
    async fn execute(&self, blueprint: &Blueprint, request: RunRequest) {
        let run_id = request.emitter.run_id().to_owned();
        let permit = tokio::select! {
            permit = self.inner.slots.clone().acquire_owned() => permit.ok(),
            _ = request.cancel.cancelled() => None,
        };
        let Some(_permit) = permit else {
            request.emitter.emit_or_log(
                None,
                EventPayload::RunFinished {
                    status: RunStatus::Cancelled,
                    error: Some("cancelled while queued".to_owned()),
                },
            );
            return;
        };
        if let Err(e) = tokio::fs::create_dir_all(&request.workspace).await {
            request.emitter.emit_or_log(
                None,
                EventPayload::RunFinished {
                    status: RunStatus::Failed,
                    error: Some(format!(
                        "cannot create the run's workspace {}: {e}",
                        request.workspace.display()
                    )),
                },
            );
            return;
        }
        let emitter = request.emitter.clone();
        tracing::info!(run = %run_id, blueprint = %blueprint.name, "run started");
        match self.inner.executor.run(blueprint, request).await {
            Ok(report) => {
                tracing::info!(run = %run_id, status = %report.status, "run finished");
            }
            Err(e) => {
                // Checked at submit; only a race with a changed handler set lands here.
                emitter.emit_or_log(
                    None,
                    EventPayload::RunFinished {
                        status: RunStatus::Failed,
                        error: Some(e.to_string()),
                    },
                );
            }
        }
    }

    /// Cancels a run this server executes: its token fires and it ends `cancelled`
    /// shortly. Returns the run as it was.
    ///
    /// # Errors
    /// [`AppError::NotFound`] for an unknown run; [`AppError::Conflict`] for one that
    /// has ended, or that another process executes.
    pub(crate) async fn cancel(&self, run_id: &str) -> Result<RunRecord, AppError> {
        let store = self.inner.store.clone();
        let id = run_id.to_owned();
        let run = tokio::task::spawn_blocking(move || store.run(&id)).await??;
        if let Some(live) = self.live().get(&run.id) {
            live.cancel.cancel();
            return Ok(run);
        }
        if run.status.is_final() {
            Err(AppError::Conflict(format!(
                "run {} has already ended ({})",
                run.id, run.status
            )))
        } else {
            Err(AppError::Conflict(format!(
                "run {} is not executed by this server (it belongs to process {})",
                run.id,
                run.owner_pid
                    .map_or_else(|| "?".to_owned(), |p| p.to_string())
            )))
        }
    }

    /// A receiver of the run's live events, if this server executes it now.
    pub(crate) fn subscribe(&self, run_id: &str) -> Option<broadcast::Receiver<Arc<LiveEvent>>> {
        self.live().get(run_id).map(|live| live.events.subscribe())
    }

    /// How many runs this server executes now (queued or running).
    pub(crate) fn live_count(&self) -> usize {
        self.live().len()
    }

    /// Refuses new runs, cancels every live one and waits up to `grace` for them to
    /// end (their cleanup included).
    pub(crate) async fn shutdown(&self, grace: Duration) {
        self.inner.closing.cancel();
        let cancelled: Vec<CancellationToken> = self
            .live()
            .values()
            .map(|live| live.cancel.clone())
            .collect();
        if !cancelled.is_empty() {
            tracing::info!("cancelling {} live runs", cancelled.len());
        }
        for token in cancelled {
            token.cancel();
        }
        self.inner.tasks.close();
        if tokio::time::timeout(grace, self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "{} runs did not end within {grace:?}; the next start marks them interrupted",
                self.live_count()
            );
        }
    }
}

/// A fresh run id: a UUID v7 (time-ordered), as the store makes them.
fn new_run_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
