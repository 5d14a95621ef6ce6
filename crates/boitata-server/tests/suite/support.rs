//! An in-process server on a port-0 listener, and an HTTP/SSE client for it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use boitata_core::config::Config;
use boitata_core::{Event, RunStatus};
use boitata_server::{Backends, Server, ServerOptions};
use futures::StreamExt;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::Value;

/// A blueprint of one host `exec` node running `command`.
pub(super) fn exec_blueprint(name: &str, command: &str) -> String {
    format!(
        "name: {name}\ndescription: runs one command on the host\nentry: step\nnodes:\n  step:\n    type: exec\n    command: {}\nedges:\n  - {{ from: step, to: END }}\n",
        serde_json::to_string(command).unwrap()
    )
}

/// How to set a test server up.
pub(super) struct Setup {
    pub(super) blueprints: Vec<(String, String)>,
    pub(super) token: Option<String>,
    pub(super) max_concurrent_runs: usize,
    pub(super) allowed_hosts: Vec<String>,
    pub(super) sandboxes: bool,
    /// The server's environment (runs' keys, `secrets.env` values).
    pub(super) env: BTreeMap<String, String>,
    /// `secrets.env` of its config.
    pub(super) secrets_env: Vec<String>,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            blueprints: vec![(
                "hello.yaml".into(),
                exec_blueprint("hello", "echo hello; echo world"),
            )],
            token: None,
            max_concurrent_runs: 4,
            allowed_hosts: Vec::new(),
            sandboxes: false,
            env: BTreeMap::new(),
            secrets_env: Vec::new(),
        }
    }
}

impl Setup {
    pub(super) fn blueprint(mut self, file: &str, yaml: &str) -> Self {
        self.blueprints.push((file.to_owned(), yaml.to_owned()));
        self
    }

    pub(super) fn token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    pub(super) fn max_concurrent_runs(mut self, n: usize) -> Self {
        self.max_concurrent_runs = n;
        self
    }

    /// Runs get the Docker sandbox nodes too (the standard backends).
    pub(super) fn sandboxes(mut self) -> Self {
        self.sandboxes = true;
        self
    }

    /// Sets a variable of the server's environment.
    pub(super) fn env(mut self, name: &str, value: &str) -> Self {
        self.env.insert(name.to_owned(), value.to_owned());
        self
    }

    /// Names a variable in the config's `secrets.env`.
    pub(super) fn secret_env(mut self, name: &str) -> Self {
        self.secrets_env.push(name.to_owned());
        self
    }

    pub(super) fn allowed_host(mut self, name: &str) -> Self {
        self.allowed_hosts.push(name.to_owned());
        self
    }

    pub(super) async fn start(self) -> TestServer {
        TestServer::start(self).await
    }
}

/// A server serving on 127.0.0.1:PORT in this process; stopped on drop.
pub(super) struct TestServer {
    pub(super) url: String,
    pub(super) token: Option<String>,
    pub(super) client: reqwest::Client,
    pub(super) dir: tempfile::TempDir,
    pub(super) rejected: Vec<boitata_server::Rejected>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TestServer {
    pub(super) async fn start(setup: Setup) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let blueprints = dir.path().join("blueprints");
        std::fs::create_dir_all(&blueprints).unwrap();
        for (file, yaml) in &setup.blueprints {
            std::fs::write(blueprints.join(file), yaml).unwrap();
        }
        let mut config = Config::default();
        config.server.api_token = setup.token.clone();
        config.server.max_concurrent_runs = setup.max_concurrent_runs;
        config.secrets.env = setup.secrets_env.clone();
        config.apply_env(&setup.env).unwrap();
        config.server.api_token = setup.token.clone();
        let mut options = ServerOptions::new(&blueprints, dir.path().join("data"), config);
        options.bind = "127.0.0.1:0".parse().unwrap();
        options.env = Arc::new(setup.env.clone());
        options.backends = if setup.sandboxes {
            Backends::standard()
        } else {
            Backends::host_only()
        };
        options.keep_alive = Duration::from_millis(500);
        options.shutdown_grace = Duration::from_secs(10);
        options.allowed_hosts = setup.allowed_hosts.clone();
        let server = Server::start(options).await.unwrap();
        let url = format!("http://{}", server.local_addr());
        let rejected = server.rejected_blueprints().to_vec();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.serve(async move {
            let _ = rx.await;
        }));
        TestServer {
            url,
            token: setup.token,
            client: reqwest::Client::new(),
            dir,
            rejected,
            shutdown: Some(tx),
        }
    }

    /// A request with the server's token (if it has one).
    pub(super) fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let builder = self.client.request(method, format!("{}{path}", self.url));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    pub(super) async fn get_json(&self, path: &str) -> Value {
        let response = self.request(Method::GET, path).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "GET {path}");
        response.json().await.unwrap()
    }

    /// Starts a run; returns its id.
    pub(super) async fn create_run(&self, blueprint: &str, task: &str) -> String {
        let response = self
            .request(Method::POST, "/api/runs")
            .json(&serde_json::json!({ "blueprint": blueprint, "task": task }))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    pub(super) async fn run_status(&self, id: &str) -> RunStatus {
        let run = self.get_json(&format!("/api/runs/{id}")).await;
        serde_json::from_value(run["status"].clone()).unwrap()
    }

    /// Waits (up to 30 s) for the run to reach `status`.
    pub(super) async fn wait_status(&self, id: &str, status: RunStatus) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = self.run_status(id).await;
            if now == status {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} is {now}, never {status}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Opens the run's SSE stream (after `last_event_id`).
    pub(super) async fn subscribe(&self, id: &str, last_event_id: Option<u64>) -> Subscription {
        subscribe(
            &self.client,
            &self.url,
            self.token.as_deref(),
            id,
            last_event_id,
        )
        .await
    }

    /// Every event of the run from the SSE stream, to its end.
    pub(super) async fn events(&self, id: &str, last_event_id: Option<u64>) -> Vec<(u64, Event)> {
        self.subscribe(id, last_event_id).await.collect_all().await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// An open SSE stream of a run's events.
pub(super) struct Subscription {
    pub(super) response_headers: reqwest::header::HeaderMap,
    stream: std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<eventsource_stream::Event, String>> + Send>,
    >,
}

pub(super) async fn subscribe(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    id: &str,
    last_event_id: Option<u64>,
) -> Subscription {
    let mut request = client
        .get(format!("{url}/api/runs/{id}/events"))
        .header("accept", "text/event-stream");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(last) = last_event_id {
        request = request.header("last-event-id", last.to_string());
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "SSE for {id}");
    let response_headers = response.headers().clone();
    use eventsource_stream::Eventsource;
    let stream = response
        .bytes_stream()
        .eventsource()
        .map(|r| r.map_err(|e| e.to_string()));
    Subscription {
        response_headers,
        stream: Box::pin(stream),
    }
}

impl Subscription {
    /// The next event (`None` at the end of the stream); panics after 30 s.
    pub(super) async fn next(&mut self) -> Option<(u64, Event)> {
        let item = tokio::time::timeout(Duration::from_secs(30), self.stream.next())
            .await
            .expect("no SSE event within 30s")?;
        let message = item.unwrap();
        let id: u64 = message.id.parse().unwrap();
        let event: Event = serde_json::from_str(&message.data).unwrap();
        Some((id, event))
    }

    /// Reads until an event of `kind`, returning everything read (that one included).
    pub(super) async fn until(&mut self, kind: &str) -> Vec<(u64, Event)> {
        let mut seen = Vec::new();
        while let Some(item) = self.next().await {
            let done = item.1.payload.kind() == kind;
            seen.push(item);
            if done {
                return seen;
            }
        }
        panic!("the stream ended before a {kind} event: {seen:?}");
    }

    pub(super) async fn collect_all(mut self) -> Vec<(u64, Event)> {
        let mut all = Vec::new();
        while let Some(item) = self.next().await {
            all.push(item);
        }
        all
    }
}

pub(super) fn kinds(events: &[(u64, Event)]) -> Vec<&'static str> {
    events.iter().map(|(_, e)| e.payload.kind()).collect()
}

/// Processes whose command line contains `needle`.
pub(super) fn processes_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if cmdline.contains(needle) && !zombie && pid != std::process::id() {
            found.push(pid);
        }
    }
    found
}

/// Waits (up to 10 s) until no process has `needle` in its command line.
pub(super) async fn wait_no_process_with(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_with(needle);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes still running: {left:?} ({needle})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(super) fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}
