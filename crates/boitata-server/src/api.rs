//! The JSON API: handlers, their request and response types, and the OpenAPI document
//! generated from them (`GET /api/openapi.json`).
//!
//! | method | path | answer |
//! |---|---|---|
//! | `GET` | `/healthz` | `{"status": "ok"}` (no token needed) |
//! | `GET` | `/api/blueprints` | `[BlueprintInfo]` |
//! | `POST` | `/api/runs` | `201` [`RunView`] (the run, `queued`) |
//! | `GET` | `/api/runs?limit=N` | `[RunView]`, newest first |
//! | `GET` | `/api/runs/{id}` | [`RunView`] |
//! | `GET` | `/api/runs/{id}/events` | SSE (see [`crate::sse`]) |
//! | `POST` | `/api/runs/{id}/cancel` | `202` [`RunView`] |
//!
//! Errors are `{"error": "..."}` ([`crate::AppError`]). The bodies are
//! `boitata_protocol::api`'s types (re-exported here), shared with the CLI's `--remote`
//! client.

use std::collections::BTreeMap;

use axum::extract::{FromRequest, Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use boitata_blueprint::Blueprint;
pub use boitata_protocol::api::{
    BlueprintInfo, CreateRun, ErrorBody, Health, ListRuns, NodeInfo, ParamInfo, RunStatusSchema,
    RunView, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT,
};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::OpenApi;

use crate::catalog::LookupError;
use crate::error::AppError;
use crate::state::AppState;

/// `axum::Json`, but a rejection is an [`AppError`] (a JSON error body).
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(AppError))]
pub(crate) struct ApiJson<T>(pub(crate) T);

/// What `GET /api/blueprints` says about `blueprint`.
fn blueprint_info(blueprint: &Blueprint) -> BlueprintInfo {
    BlueprintInfo {
        name: blueprint.name.clone(),
        description: blueprint.description.clone(),
        params: blueprint
            .params
            .iter()
            .map(|(name, param)| ParamInfo {
                name: name.clone(),
                description: param.description.clone(),
                default: param.default.clone(),
                required: param.default.is_none(),
            })
            .collect(),
        entry: blueprint.entry.clone(),
        nodes: blueprint
            .nodes
            .iter()
            .map(|node| NodeInfo {
                id: node.id.clone(),
                node_type: node.node_type().as_str().to_owned(),
                description: node.description.clone(),
            })
            .collect(),
    }
}

/// Liveness: answers without a token.
#[utoipa::path(get, path = "/healthz", tag = "server", responses((status = 200, body = Health)))]
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
    })
}

/// The blueprints this server offers.
#[utoipa::path(
    get,
    path = "/api/blueprints",
    tag = "blueprints",
    responses(
        (status = 200, body = [BlueprintInfo]),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list_blueprints(State(state): State<AppState>) -> Json<Vec<BlueprintInfo>> {
    Json(
        state
            .catalog()
            .iter()
            .map(|entry| blueprint_info(&entry.blueprint))
            .collect(),
    )
}

/// Starts a run of a blueprint (it is `queued` until a slot is free).
#[utoipa::path(
    post,
    path = "/api/runs",
    tag = "runs",
    request_body = CreateRun,
    responses(
        (status = 201, description = "Accepted; `Location` is the run's URL", body = RunView),
        (status = 400, description = "Malformed body or blueprint name", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "No such blueprint", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 415, description = "Not application/json", body = ErrorBody),
        (status = 422, description = "Bad params, or a node no backend here runs", body = ErrorBody),
        (status = 503, description = "Shutting down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn create_run(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateRun>,
) -> Result<impl IntoResponse, AppError> {
    let entry = state.catalog().get(&body.blueprint).map_err(|e| match e {
        LookupError::InvalidName(_) => AppError::BadRequest(e.to_string()),
        LookupError::Unknown { .. } => AppError::NotFound(e.to_string()),
    })?;
    if body.task.trim().is_empty() {
        return Err(AppError::Unprocessable(
            "task is empty: say what the run should do".to_owned(),
        ));
    }
    let mut params = BTreeMap::new();
    for (name, value) in body.params {
        let text = match value {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            other => {
                return Err(AppError::Unprocessable(format!(
                    "param {name:?} must be a string, number or boolean, not {other}"
                )))
            }
        };
        params.insert(name, text);
    }
    let run = state
        .scheduler()
        .submit(entry.blueprint.clone(), body.task, params)
        .await?;
    let location = format!("/api/runs/{}", run.id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(RunView::from(run)),
    ))
}

/// Recent runs, newest first.
#[utoipa::path(
    get,
    path = "/api/runs",
    tag = "runs",
    params(ListRuns),
    responses(
        (status = 200, body = [RunView]),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list_runs(
    State(state): State<AppState>,
    query: Result<Query<ListRuns>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<RunView>>, AppError> {
    let Query(query) = query?;
    let limit = query
        .limit
        .unwrap_or(DEFAULT_LIST_LIMIT)
        .clamp(1, MAX_LIST_LIMIT);
    let store = state.store().clone();
    let runs = tokio::task::spawn_blocking(move || store.list_runs(limit)).await??;
    Ok(Json(runs.into_iter().map(RunView::from).collect()))
}

/// One run, by id (or a unique prefix of it).
#[utoipa::path(
    get,
    path = "/api/runs/{id}",
    tag = "runs",
    params(("id" = String, Path, description = "The run id, or a unique prefix")),
    responses(
        (status = 200, body = RunView),
        (status = 400, description = "Ambiguous prefix", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<RunView>, AppError> {
    let store = state.store().clone();
    let run = tokio::task::spawn_blocking(move || store.find_run(&id)).await??;
    Ok(Json(RunView::from(run)))
}

/// Cancels a queued or running run. It ends `cancelled` once its current node has
/// stopped and its cleanup has run; follow its events to see that.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/cancel",
    tag = "runs",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 202, description = "Cancellation requested", body = RunView),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
        (status = 409, description = "The run has ended, or another process runs it", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn cancel_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, AppError> {
    let run = state.scheduler().cancel(&id).await?;
    tracing::info!(run = %run.id, "cancel requested");
    Ok((StatusCode::ACCEPTED, Json(RunView::from(run))))
}

/// This document.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "server",
    responses((status = 200, description = "The OpenAPI 3 document", body = Object)),
    security(("bearer" = []))
)]
pub(crate) async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// Any other path: a JSON 404.
pub(crate) async fn not_found() -> AppError {
    AppError::NotFound("no such route (see /api/openapi.json)".to_owned())
}

/// The OpenAPI document of the API, generated from the handlers above.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Boitata server",
        description = "Runs blueprints and streams their events. With a token configured, every /api route needs `Authorization: Bearer TOKEN`."
    ),
    paths(
        healthz,
        list_blueprints,
        create_run,
        list_runs,
        get_run,
        crate::sse::run_events,
        cancel_run,
        openapi
    ),
    components(schemas(BlueprintInfo, ParamInfo, NodeInfo, CreateRun, RunView, RunStatusSchema, Health, ErrorBody)),
    modifiers(&BearerAuth),
    tags(
        (name = "blueprints", description = "The trusted blueprints this server offers"),
        (name = "runs", description = "Runs and their events"),
        (name = "server", description = "Health and this document")
    )
)]
pub struct ApiDoc;

/// Adds the `bearer` security scheme.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}
