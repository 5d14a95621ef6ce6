//! What every handler shares: the store, the blueprints, the scheduler, the auth
//! settings. Cheap to clone (one `Arc`).

use std::sync::Arc;
use std::time::Duration;

use boitata_core::store::RunStore;

use crate::auth::ApiToken;
use crate::catalog::BlueprintCatalog;
use crate::ended_runs::EndedRuns;
use crate::host_guard::HostPolicy;
use crate::scheduler::Scheduler;

/// The state behind [`app`](crate::app): hand it to the router, clone it freely.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn RunStore>,
    catalog: BlueprintCatalog,
    scheduler: Scheduler,
    token: Option<ApiToken>,
    host_policy: HostPolicy,
    keep_alive: Duration,
    ended_runs: EndedRuns,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("store", &self.inner.store.location())
            .field("blueprints", &self.inner.catalog.len())
            .field("token", &self.inner.token.is_some())
            .field("host_policy", &self.inner.host_policy)
            .finish_non_exhaustive()
    }
}

impl AppState {
    pub(crate) fn new(
        store: Arc<dyn RunStore>,
        catalog: BlueprintCatalog,
        scheduler: Scheduler,
        token: Option<ApiToken>,
        host_policy: HostPolicy,
        keep_alive: Duration,
    ) -> Self {
        AppState {
            inner: Arc::new(Inner {
                store,
                catalog,
                scheduler,
                token,
                host_policy,
                keep_alive,
                ended_runs: EndedRuns::default(),
            }),
        }
    }

    /// The run store.
    pub fn store(&self) -> &Arc<dyn RunStore> {
        &self.inner.store
    }

    /// The offered blueprints.
    pub fn catalog(&self) -> &BlueprintCatalog {
        &self.inner.catalog
    }

    pub(crate) fn scheduler(&self) -> &Scheduler {
        &self.inner.scheduler
    }

    pub(crate) fn token(&self) -> Option<&ApiToken> {
        self.inner.token.as_ref()
    }

    pub(crate) fn host_policy(&self) -> &HostPolicy {
        &self.inner.host_policy
    }

    pub(crate) fn keep_alive(&self) -> Duration {
        self.inner.keep_alive
    }

    pub(crate) fn ended_runs(&self) -> &EndedRuns {
        &self.inner.ended_runs
    }
}
