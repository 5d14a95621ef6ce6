//! The HTTP API's request and response bodies, with their OpenAPI schemas.
//!
//! The server answers with these types and the CLI's `--remote` client sends and reads
//! them, so both ends agree by construction. The routes:
//!
//! | method | path | body | answer |
//! |---|---|---|---|
//! | `GET` | `/healthz` | | [`Health`] |
//! | `GET` | `/api/blueprints` | | `[`[`BlueprintInfo`]`]` |
//! | `POST` | `/api/runs` | [`CreateRun`] | `201` [`RunView`] |
//! | `GET` | `/api/runs?limit=N` ([`ListRuns`]) | | `[`[`RunView`]`]`, newest first |
//! | `GET` | `/api/runs/{id}` | | [`RunView`] |
//! | `GET` | `/api/runs/{id}/events` | | SSE of [`Event`](crate::Event), or a JSON array |
//! | `POST` | `/api/runs/{id}/cancel` | | `202` [`RunView`] |
//!
//! Every error answer is an [`ErrorBody`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::event::RunStatus;

/// The most runs `GET /api/runs` returns.
pub const MAX_LIST_LIMIT: usize = 1000;

/// How many runs `GET /api/runs` returns without `limit`.
pub const DEFAULT_LIST_LIMIT: usize = 50;

/// A blueprint the server offers (`GET /api/blueprints`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BlueprintInfo {
    /// Its name (`[a-z0-9_-]+`): what `POST /api/runs` takes.
    #[schema(example = "test_fix_loop")]
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// The params it declares, by name.
    pub params: Vec<ParamInfo>,
    /// The node the walk starts at.
    pub entry: String,
    /// Its nodes, in file order.
    pub nodes: Vec<NodeInfo>,
}

/// A declared blueprint param.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ParamInfo {
    /// The name (`{params.NAME}`).
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// The value used when a run sets none.
    pub default: Option<String>,
    /// True when there is no default: a run must set it.
    pub required: bool,
}

/// A node of a blueprint.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodeInfo {
    /// The node id.
    pub id: String,
    /// Its type (`exec`, `agent`, `provision`, …).
    #[serde(rename = "type")]
    pub node_type: String,
    /// What it does.
    pub description: Option<String>,
}

/// The body of `POST /api/runs`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRun {
    /// The blueprint's name (never a path).
    #[schema(example = "test_fix_loop")]
    pub blueprint: String,
    /// The task (`{task}`).
    #[schema(example = "make the tests pass")]
    pub task: String,
    /// Param values by name: strings (numbers and booleans are taken as their text).
    #[serde(default)]
    #[schema(value_type = Object, example = json!({"test_command": "cargo test"}))]
    pub params: BTreeMap<String, serde_json::Value>,
}

/// A run's status, as the OpenAPI document describes [`RunStatus`].
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatusSchema {
    /// Accepted, waiting for a slot.
    Queued,
    /// In progress.
    Running,
    /// Ended well.
    Succeeded,
    /// Ended badly (including interrupted by a server restart).
    Failed,
    /// Stopped on request.
    Cancelled,
}

/// A run, as the API shows it (and as `boitata runs` prints it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunView {
    /// The run id (a UUID v7).
    pub id: String,
    /// The blueprint's name.
    pub blueprint: Option<String>,
    /// The task.
    pub task: String,
    /// The params the run was given.
    #[schema(value_type = Object)]
    pub params: serde_json::Map<String, serde_json::Value>,
    /// `queued` | `running` | `succeeded` | `failed` | `cancelled`.
    #[schema(value_type = RunStatusSchema)]
    pub status: RunStatus,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// When it was accepted (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
}

/// The answer of `GET /healthz`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    #[schema(example = "ok")]
    pub status: String,
}

/// Query of `GET /api/runs`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListRuns {
    /// How many runs (default 50, at most 1000).
    pub limit: Option<usize>,
}

/// The JSON body of every error answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, in one line.
    #[schema(example = "no run 0193f1c2-…")]
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_run_refuses_unknown_fields_and_defaults_params() {
        let body: CreateRun =
            serde_json::from_str(r#"{"blueprint":"hello","task":"say hi"}"#).unwrap();
        assert!(body.params.is_empty());
        let err = serde_json::from_str::<CreateRun>(
            r#"{"blueprint":"hello","task":"say hi","workspace":"/etc"}"#,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("unknown field `workspace`"),
            "{err}"
        );
    }

    #[test]
    fn a_run_view_reads_the_status_as_its_text() {
        let view: RunView = serde_json::from_str(
            r#"{"id":"r","blueprint":null,"task":"t","params":{},"status":"cancelled",
                "error":null,"created_at":"2026-11-29T13:04:20.123Z","finished_at":null}"#,
        )
        .unwrap();
        assert_eq!(view.status, RunStatus::Cancelled);
    }
}
