//! A fake model API over real HTTP.

use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// A fake model API: a [`MockServer`] answering the API's one endpoint with the
/// responses queued by [`FakeModel::push`], each used once, in order. A request beyond
/// the queue gets a 404.
#[derive(Debug)]
pub struct FakeModel {
    server: MockServer,
    base_path: &'static str,
    endpoint: &'static str,
    /// The port, when the server listens on every interface.
    all_interfaces_port: Option<u16>,
}

impl FakeModel {
    /// A fake of the OpenAI Chat Completions API: base URL `{uri}/v1`, endpoint
    /// `POST /v1/chat/completions`.
    pub async fn openai() -> Self {
        FakeModel {
            server: MockServer::start().await,
            base_path: "/v1",
            endpoint: "/v1/chat/completions",
            all_interfaces_port: None,
        }
    }

    /// Like [`FakeModel::openai`], but listening on every interface (`0.0.0.0`), so
    /// that a container on Docker's bridge reaches it through the host's gateway
    /// address. [`FakeModel::base_url`] still names `127.0.0.1`, as a user's config
    /// for a local model server would.
    pub async fn openai_for_containers() -> Self {
        let listener = std::net::TcpListener::bind("0.0.0.0:0")
            .unwrap_or_else(|e| panic!("cannot listen on 0.0.0.0: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("listener address: {e}"))
            .port();
        FakeModel {
            server: MockServer::builder().listener(listener).start().await,
            base_path: "/v1",
            endpoint: "/v1/chat/completions",
            all_interfaces_port: Some(port),
        }
    }

    /// A fake of the Anthropic Messages API: base URL `{uri}`, endpoint
    /// `POST /v1/messages`.
    pub async fn anthropic() -> Self {
        FakeModel {
            server: MockServer::start().await,
            base_path: "",
            endpoint: "/v1/messages",
            all_interfaces_port: None,
        }
    }

    /// The `base_url` a provider should use.
    pub fn base_url(&self) -> String {
        match self.all_interfaces_port {
            Some(port) => format!("http://127.0.0.1:{port}{}", self.base_path),
            None => format!("{}{}", self.server.uri(), self.base_path),
        }
    }

    /// The path requests are expected on.
    pub fn endpoint(&self) -> &'static str {
        self.endpoint
    }

    /// Queues `response` for the next request not yet answered.
    pub async fn push(&self, response: ResponseTemplate) {
        Mock::given(method("POST"))
            .and(path(self.endpoint))
            .respond_with(response)
            .up_to_n_times(1)
            .mount(&self.server)
            .await;
    }

    /// Every request received, in order.
    pub async fn requests(&self) -> Vec<Request> {
        self.server.received_requests().await.unwrap_or_default()
    }

    /// The JSON bodies of every request received, in order (`Value::Null` for a body
    /// that is not JSON).
    pub async fn bodies(&self) -> Vec<Value> {
        self.requests()
            .await
            .iter()
            .map(|r| r.body_json().unwrap_or(Value::Null))
            .collect()
    }

    /// The underlying server, for custom mocks.
    pub fn server(&self) -> &MockServer {
        &self.server
    }
}
