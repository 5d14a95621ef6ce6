//! [`AcpError`]: everything [`serve`](crate::serve) and [`run_prompt`](crate::run_prompt)
//! can fail with, each message saying what happened and what to do.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What can go wrong serving or driving an ACP agent.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// Nothing accepted a TCP connection at the address.
    #[error("cannot connect to the agent at {addr}: {source} (is boitata-agent running and listening there?)")]
    Connect {
        /// The address tried.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// No agent answered at the address in time ([`wait_ready`](crate::wait_ready)).
    #[error("no ACP agent answered at {addr} within {waited:?}: {last_error}")]
    NotReady {
        /// The address tried.
        addr: SocketAddr,
        /// How long we tried.
        waited: Duration,
        /// The last attempt's failure.
        last_error: String,
    },
    /// Reading or writing the connection failed outside any protocol step.
    #[error("ACP connection failed: {0}")]
    Io(#[from] std::io::Error),
    /// The agent refused the secret, or wants one and none was given.
    #[error("authentication refused by the agent: {message}")]
    AuthenticationRefused {
        /// The agent's reason (or ours, when we had no secret to present).
        message: String,
    },
    /// The agent closed the connection while a turn was running.
    #[error("the agent closed the connection during the turn")]
    ClosedDuringTurn,
    /// The agent closed the connection before the turn began.
    #[error("the agent closed the connection during {stage}")]
    Closed {
        /// The step that was under way (`initialize`, `authenticate`, `session/new`).
        stage: &'static str,
    },
    /// The agent answered a request with an error.
    #[error("the agent refused {method}: {message}")]
    Refused {
        /// The ACP method (`session/new`, `session/prompt`, …).
        method: &'static str,
        /// The agent's error message (and data, if any).
        message: String,
    },
    /// After `session/cancel` the agent did not end the turn in time.
    #[error("the agent did not end the turn within {grace:?} of session/cancel")]
    CancelTimeout {
        /// How long we waited.
        grace: Duration,
    },
    /// The peer broke the protocol (an undecodable message, an unexpected answer).
    #[error("ACP protocol error: {0}")]
    Protocol(String),
    /// The workspace root given to the server is not a directory we can resolve.
    #[error("workspace root {path}: {source}")]
    WorkspaceRoot {
        /// The root as given.
        path: PathBuf,
        /// Why it cannot be used.
        source: std::io::Error,
    },
}

impl AcpError {
    /// A protocol error from the SDK's error, with its data when it has any.
    pub(crate) fn protocol(error: &agent_client_protocol::Error) -> Self {
        AcpError::Protocol(describe(error))
    }
}

/// An SDK error as one line: its message, then its data if any.
pub(crate) fn describe(error: &agent_client_protocol::Error) -> String {
    match &error.data {
        Some(serde_json::Value::String(data)) if !data.is_empty() => {
            format!("{} ({data})", error.message)
        }
        Some(data) if !data.is_null() => format!("{} ({data})", error.message),
        _ => error.message.clone(),
    }
}
