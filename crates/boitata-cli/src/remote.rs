//! `--remote URL`: runs scheduled on a `boitata-server`, shown exactly like local runs.
//!
//! `boitata run TASK --blueprint NAME --remote URL` posts the run, then follows its
//! events over SSE and feeds each one to the same [`Renderer`] a local run uses, so the
//! human progress, the `--json` lines and the exit code (0, 1, 130) are the same. A
//! dropped connection is resumed with `Last-Event-ID`; the first Ctrl-C (or SIGTERM)
//! cancels the run on the server and waits for it to end, a second one quits at once.
//! `boitata runs list|show --remote URL` read the server's runs.
//!
//! The token comes from `--token` or `BOITATA_API_TOKEN` and is sent as
//! `Authorization: Bearer`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use boitata_core::{Event, EventPayload, EventSink, RunStatus};
use boitata_protocol::api::{CreateRun, ErrorBody, RunView, MAX_LIST_LIMIT};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::{Method, StatusCode};
use tokio_util::sync::CancellationToken;

use crate::args::{RemoteArgs, RunArgs, RunsListArgs, RunsShowArgs};
use crate::error::CliError;
use crate::render::Renderer;
use crate::runs;

/// How many times a dropped event stream is resumed before giving up.
const MAX_RECONNECTS: u32 = 8;

/// A client of one server's API.
#[derive(Clone)]
struct RemoteClient {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl RemoteClient {
    /// A client for `args.remote` (`http://HOST:PORT`, with or without a trailing `/`).
    fn new(args: &RemoteArgs) -> Result<Self, CliError> {
        let url = args.remote.as_deref().unwrap_or_default().trim();
        let parsed = reqwest::Url::parse(url).map_err(|e| {
            CliError::usage(format!(
                "--remote {url:?} is not a URL ({e}); use e.g. http://127.0.0.1:8420"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(CliError::usage(format!(
                "--remote {url:?}: use an http:// or https:// URL"
            )));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| CliError::usage(format!("cannot build an HTTP client: {e}")))?;
        Ok(RemoteClient {
            base: url.trim_end_matches('/').to_owned(),
            token: args.token.clone().filter(|t| !t.trim().is_empty()),
            http,
        })
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Sends `request`; a non-2xx answer becomes the error its status calls for.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, RemoteError> {
        let response = request.send().await.map_err(|e| {
            RemoteError::Unreachable(format!(
                "cannot reach the server at {}: {} (is boitata-server running there?)",
                self.base,
                root_cause(&e)
            ))
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let message = response
            .json::<ErrorBody>()
            .await
            .map(|body| body.error)
            .unwrap_or_else(|_| status.to_string());
        Err(match status {
            StatusCode::UNAUTHORIZED if self.token.is_none() => RemoteError::Refused(
                status,
                format!(
                "the server at {} needs an API token: pass --token TOKEN or set BOITATA_API_TOKEN",
                self.base
            ),
            ),
            StatusCode::UNAUTHORIZED => RemoteError::Refused(
                status,
                format!(
                    "the server at {} refused the token (check --token or BOITATA_API_TOKEN)",
                    self.base
                ),
            ),
            s if s.is_client_error() => {
                RemoteError::Refused(s, format!("the server refused: {message}"))
            }
            _ => RemoteError::Failed(format!("the server failed: {message}")),
        })
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, RemoteError> {
        self.send(request)
            .await?
            .json()
            .await
            .map_err(|e| RemoteError::Failed(format!("unexpected answer from the server: {e}")))
    }

    async fn create_run(
        &self,
        blueprint: &str,
        task: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<RunView, CliError> {
        let body = CreateRun {
            blueprint: blueprint.to_owned(),
            task: task.to_owned(),
            params: params
                .iter()
                .map(|(name, value)| (name.clone(), serde_json::Value::from(value.as_str())))
                .collect(),
        };
        Ok(self
            .json(self.request(Method::POST, "/api/runs").json(&body))
            .await?)
    }

    async fn cancel(&self, run_id: &str) -> Result<(), CliError> {
        self.send(self.request(Method::POST, &format!("/api/runs/{run_id}/cancel")))
            .await
            .map(drop)
            .map_err(CliError::from)
    }

    /// Follows the run's events after `after` until `run_finished`, handing each to
    /// `on_event`; resumes a dropped stream with `Last-Event-ID`. Returns the final
    /// status.
    async fn follow(
        &self,
        run_id: &str,
        mut on_event: impl FnMut(&Event),
    ) -> Result<RunStatus, CliError> {
        let mut last = 0u64;
        let mut failures = 0u32;
        loop {
            let mut request = self
                .request(Method::GET, &format!("/api/runs/{run_id}/events"))
                .header("accept", "text/event-stream");
            if last > 0 {
                request = request.header("last-event-id", last.to_string());
            }
            let dropped = match self.send(request).await {
                Ok(response) => {
                    let mut stream = response.bytes_stream().eventsource();
                    let mut why = "the stream ended before run_finished".to_owned();
                    while let Some(message) = stream.next().await {
                        let message = match message {
                            Ok(message) => message,
                            Err(e) => {
                                why = e.to_string();
                                break;
                            }
                        };
                        let event: Event = serde_json::from_str(&message.data).map_err(|e| {
                            CliError::failed(format!(
                                "the server sent an event this client cannot read: {e}"
                            ))
                        })?;
                        if event.seq <= last {
                            continue;
                        }
                        last = event.seq;
                        failures = 0;
                        on_event(&event);
                        if let EventPayload::RunFinished { status, .. } = event.payload {
                            return Ok(status);
                        }
                    }
                    why
                }
                // Refusals (401, 404) do not get better by retrying.
                Err(e @ RemoteError::Refused(..)) => return Err(e.into()),
                Err(RemoteError::Unreachable(message) | RemoteError::Failed(message)) => message,
            };
            failures += 1;
            if failures > MAX_RECONNECTS {
                return Err(CliError::failed(format!(
                    "lost the event stream of run {run_id} ({dropped}); the run goes on on the server: \
                     follow it with `boitata runs show {run_id} --remote {}`",
                    self.base
                )));
            }
            tokio::time::sleep(Duration::from_millis(250 * 2u64.pow(failures.min(5)))).await;
        }
    }
}

/// Why a request to the server failed.
enum RemoteError {
    /// No answer: refused connection, DNS, a timeout (exit 2 before a run starts).
    Unreachable(String),
    /// A 4xx answer: the request was wrong (exit 2).
    Refused(StatusCode, String),
    /// A 5xx answer (exit 1).
    Failed(String),
}

impl From<RemoteError> for CliError {
    fn from(e: RemoteError) -> Self {
        match e {
            RemoteError::Unreachable(message) | RemoteError::Refused(_, message) => {
                CliError::usage(message)
            }
            RemoteError::Failed(message) => CliError::failed(message),
        }
    }
}

/// The innermost cause of an HTTP error (`Connection refused`, not `error sending
/// request for url (…)`).
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// `boitata run TASK --blueprint NAME --remote URL`.
pub(crate) async fn run(args: RunArgs) -> Result<u8, CliError> {
    let Some(blueprint) = args.blueprint.as_deref() else {
        return Err(CliError::usage(
            "--remote needs --blueprint NAME: a server runs the blueprints it offers, by name",
        ));
    };
    let local_only = [
        ("--workspace", args.workspace.is_some()),
        ("--provider", args.provider.is_some()),
        ("--model", args.model.is_some()),
        ("--script", args.script.is_some()),
        ("--stream", args.stream.is_some()),
        ("--max-turns", args.max_turns.is_some()),
    ];
    if let Some((flag, _)) = local_only.iter().find(|(_, set)| *set) {
        return Err(CliError::usage(format!(
            "{flag} cannot be used with --remote: the server runs the blueprint with its own workspace and settings"
        )));
    }
    if let Some((name, times)) = boitata_blueprint::params::repeated(&args.params)
        .into_iter()
        .next()
    {
        return Err(CliError::usage(format!(
            "--param {name} is given {times} times: give each param once"
        )));
    }
    let client = RemoteClient::new(&args.remote)?;
    let params: BTreeMap<String, String> = args.params.iter().cloned().collect();
    let renderer = Arc::new(Renderer::new(args.json));
    let run = client.create_run(blueprint, &args.task, &params).await?;

    let cancel = CancellationToken::new();
    let watcher = tokio::spawn(crate::session::cancel_on_signals(
        cancel.clone(),
        renderer.clone(),
        CANCEL_NOTE,
    ));
    let canceller = {
        let cancel = cancel.clone();
        let client = client.clone();
        let run_id = run.id.clone();
        let renderer = renderer.clone();
        tokio::spawn(async move {
            cancel.cancelled().await;
            if let Err(e) = client.cancel(&run_id).await {
                renderer.note(&format!(
                    "could not cancel the run on the server: {}",
                    e.message
                ));
            }
        })
    };

    // The output of the last node, as the local run prints it (from its preview).
    let mut last_output: Option<String> = None;
    let outcome = client
        .follow(&run.id, |event| {
            if let EventPayload::NodeFinished { output_preview, .. } = &event.payload {
                last_output = Some(output_preview.clone());
            }
            let _ = renderer.accept(event);
        })
        .await;
    watcher.abort();
    canceller.abort();
    renderer.finish();
    let status = outcome?;
    if status == RunStatus::Succeeded {
        if let Some(output) = &last_output {
            renderer.print_result(output);
        }
    }
    Ok(status.exit_code() as u8)
}

const CANCEL_NOTE: &str = "cancelling the run on the server: it stops its current step and cleans up (press Ctrl-C again to quit at once; the run is still cancelled)";

/// `boitata runs list --remote URL`.
pub(crate) async fn runs_list(args: RunsListArgs) -> Result<u8, CliError> {
    let client = RemoteClient::new(&args.remote)?;
    let path = format!(
        "/api/runs?limit={}",
        args.limit.clamp(1, MAX_LIST_LIMIT as u32)
    );
    let runs: Vec<RunView> = client.json(client.request(Method::GET, &path)).await?;
    runs::print_list(&runs, args.json)
}

/// `boitata runs show ID --remote URL`: the run and the events stored so far.
pub(crate) async fn runs_show(args: RunsShowArgs) -> Result<u8, CliError> {
    let client = RemoteClient::new(&args.remote)?;
    let run: RunView = client
        .json(client.request(Method::GET, &format!("/api/runs/{}", args.id)))
        .await
        .map_err(|e| match e {
            // No such run: a failed lookup (exit 1), as `runs show` says locally.
            RemoteError::Refused(StatusCode::NOT_FOUND, message) => CliError::failed(message),
            other => other.into(),
        })?;
    let events: Vec<Event> = client
        .json(
            client
                .request(Method::GET, &format!("/api/runs/{}/events", run.id))
                .header("accept", "application/json"),
        )
        .await?;
    runs::print_show(&run, None, &events, args.json)
}
