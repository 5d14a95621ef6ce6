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
}

impl FakeModel {
    /// A fake of the OpenAI Chat Completions API: base URL `{uri}/v1`, endpoint
    /// `POST /v1/chat/completions`.
    pub async fn openai() -> Self {
        FakeModel {
            server: MockServer::start().await,
            base_path: "/v1",
            endpoint: "/v1/chat/completions",
        }
    }

    /// A fake of the Anthropic Messages API: base URL `{uri}`, endpoint
    /// `POST /v1/messages`.
    pub async fn anthropic() -> Self {
        FakeModel {
            server: MockServer::start().await,
            base_path: "",
            endpoint: "/v1/messages",
        }
    }

    /// The `base_url` a provider should use (on loopback: a sandbox cannot reach it;
    /// agents in sandboxes reach it through the model gateway).
    pub fn base_url(&self) -> String {
        format!("{}{}", self.server.uri(), self.base_path)
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
