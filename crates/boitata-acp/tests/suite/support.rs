//! A fake model provider, an agent server on a real TCP port, and a raw JSON-RPC client
//! that shows exactly what crosses the wire.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use boitata_acp::AcpServer;
use boitata_core::config::Config;
use boitata_core::runtime::Runtime;
use boitata_core::Event;
use boitata_provider::{
    ModelRequest, ModelStream, Provider, ProviderError, StopReason, StreamEvent, ToolCall, Usage,
};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Long enough for anything that should happen; a test that waits this long has failed.
pub(super) const PATIENCE: Duration = Duration::from_secs(20);

/// One scripted model response.
pub(super) enum FakeTurn {
    /// Say `text`, then make these tool calls (name, arguments).
    Reply(&'static str, Vec<(&'static str, Value)>),
    /// Never answer (until the request is dropped, i.e. the turn is cancelled).
    Hang,
}

/// A model that replays [`FakeTurn`]s, one per request, and records the requests.
pub(super) struct FakeProvider {
    turns: Mutex<VecDeque<FakeTurn>>,
    calls: Mutex<u32>,
    /// Notified when a [`FakeTurn::Hang`] request starts.
    pub(super) hanging: Notify,
    /// Every request's last message, as JSON.
    pub(super) requests: Mutex<Vec<Value>>,
}

impl FakeProvider {
    pub(super) fn new(turns: Vec<FakeTurn>) -> Arc<Self> {
        Arc::new(FakeProvider {
            turns: Mutex::new(turns.into()),
            calls: Mutex::new(0),
            hanging: Notify::new(),
            requests: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl Provider for FakeProvider {
    fn name(&self) -> &str {
        "fake"
    }

    fn model(&self) -> &str {
        "fake-model"
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream, ProviderError> {
        self.requests
            .lock()
            .unwrap()
            .push(serde_json::to_value(request.messages.last()).unwrap());
        let turn = self.turns.lock().unwrap().pop_front();
        match turn {
            Some(FakeTurn::Reply(text, calls)) => {
                let mut events = vec![Ok(StreamEvent::Usage(Usage {
                    input_tokens: 10,
                    output_tokens: 5,
                }))];
                events.push(Ok(StreamEvent::TextDelta(text.to_owned())));
                let has_calls = !calls.is_empty();
                for (name, arguments) in calls {
                    let mut n = self.calls.lock().unwrap();
                    *n += 1;
                    events.push(Ok(StreamEvent::ToolCall(ToolCall {
                        id: format!("call_{n}"),
                        name: name.to_owned(),
                        arguments,
                    })));
                }
                events.push(Ok(StreamEvent::Finished(if has_calls {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                })));
                Ok(Box::pin(futures::stream::iter(events)))
            }
            Some(FakeTurn::Hang) => {
                self.hanging.notify_one();
                Ok(Box::pin(futures::stream::pending()))
            }
            None => Err(ProviderError::Script("fake provider: no more turns".into())),
        }
    }
}

/// An agent server on 127.0.0.1, serving a temp workspace with a fake provider.
pub(super) struct TestAgent {
    pub(super) addr: SocketAddr,
    pub(super) provider: Arc<FakeProvider>,
    pub(super) workspace: tempfile::TempDir,
    pub(super) shutdown: CancellationToken,
    pub(super) server: tokio::task::JoinHandle<()>,
}

impl TestAgent {
    /// Starts serving at once. `secret`: the run secret clients must present.
    pub(super) async fn start(turns: Vec<FakeTurn>, secret: Option<&str>) -> TestAgent {
        Self::start_with(turns, secret, |server| server).await
    }

    /// Like [`TestAgent::start`], with the server changed by `configure` first (limits).
    pub(super) async fn start_with(
        turns: Vec<FakeTurn>,
        secret: Option<&str>,
        configure: impl FnOnce(AcpServer) -> AcpServer,
    ) -> TestAgent {
        let provider = FakeProvider::new(turns);
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join("README.md"), "# test\n").unwrap();
        let shutdown = CancellationToken::new();
        let server = AcpServer::new(runtime(provider.clone()), workspace.path())
            .unwrap()
            .with_secret(secret.map(str::to_owned))
            .with_shutdown(shutdown.clone());
        let server = configure(server);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move { server.serve_tcp(listener).await.unwrap() });
        TestAgent {
            addr,
            provider,
            workspace,
            shutdown,
            server,
        }
    }

    /// The workspace root as the server resolved it.
    pub(super) fn root(&self) -> std::path::PathBuf {
        std::fs::canonicalize(self.workspace.path()).unwrap()
    }
}

/// A runtime around `provider`, with default settings and an empty environment.
pub(super) fn runtime(provider: Arc<FakeProvider>) -> Runtime {
    Runtime::with_provider(
        Config::default(),
        provider,
        &BTreeMap::<String, String>::new(),
    )
}

/// Collects the events `run_prompt` hands out.
#[derive(Clone, Default)]
pub(super) struct Seen(pub(super) Arc<Mutex<Vec<Event>>>);

impl Seen {
    pub(super) fn callback(&self) -> impl FnMut(Event) + Send + 'static {
        let seen = self.0.clone();
        move |event| seen.lock().unwrap().push(event)
    }

    pub(super) fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }

    pub(super) fn kinds(&self) -> Vec<&'static str> {
        self.events().iter().map(|e| e.payload.kind()).collect()
    }
}

/// A JSON-RPC client that writes and reads raw lines, keeping every message it reads.
pub(super) struct RawClient {
    lines: Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
    next_id: u64,
}

impl RawClient {
    pub(super) async fn connect(addr: SocketAddr) -> RawClient {
        let (read, write) = TcpStream::connect(addr).await.unwrap().into_split();
        RawClient {
            lines: BufReader::new(read).lines(),
            write,
            next_id: 0,
        }
    }

    pub(super) async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_string(&message).unwrap();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await.unwrap();
    }

    pub(super) async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// The next message from the agent (panics on EOF or after [`PATIENCE`]).
    pub(super) async fn read(&mut self) -> Value {
        let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("no message from the agent in time")
            .unwrap()
            .expect("the agent closed the connection");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends a request; returns its response and every message that came before it.
    pub(super) async fn request(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let mut before = Vec::new();
        loop {
            let message = self.read().await;
            if message.get("method").is_none() && message["id"] == id {
                return (message, before);
            }
            before.push(message);
        }
    }

    /// `initialize` with protocol v1, optionally with a secret in `_meta.boitata`.
    pub(super) async fn initialize(&mut self, secret: Option<&str>) -> Value {
        let mut params = json!({"protocolVersion": 1, "clientCapabilities": {}});
        if let Some(secret) = secret {
            params["_meta"] = json!({"boitata": {"secret": secret}});
        }
        self.request("initialize", params).await.0
    }

    pub(super) async fn authenticate(&mut self, secret: &str) -> Value {
        self.request(
            "authenticate",
            json!({"methodId": "boitata-secret", "_meta": {"boitata": {"secret": secret}}}),
        )
        .await
        .0
    }

    pub(super) async fn new_session(&mut self, cwd: &std::path::Path) -> Value {
        self.request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await
            .0
    }
}
