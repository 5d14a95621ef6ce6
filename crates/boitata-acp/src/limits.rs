//! What one client may cost the agent before it has proved anything: the longest line
//! it may send, how long it may stay unauthenticated, and how many connections may be
//! open at once. [`AcpServer`](crate::AcpServer) enforces them; its `with_*` methods
//! change them (tests shorten them).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};

/// The longest JSON-RPC line (bytes, without its newline) either side may send: a
/// client to the agent ([`AcpServer`](crate::AcpServer)), or an agent to Boitata's
/// client ([`run_prompt`](crate::run_prompt)). A longer line closes the connection as
/// soon as its first `MAX_LINE_BYTES + 1` bytes have arrived, without buffering the
/// rest; it is never parsed nor echoed back.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// How long a connection to an agent with a secret may stay unauthenticated (neither a
/// right secret in `initialize` nor a successful `authenticate`) before it is closed.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(30);

/// How many connections [`AcpServer::serve_tcp`](crate::AcpServer::serve_tcp) serves at
/// once. A connection beyond it is accepted and closed at once, before anything is read.
pub const MAX_CONNECTIONS: usize = 16;

/// How often a repeated accept failure or refused connection is logged: the first at
/// once, later ones counted and reported together at most this often.
pub(crate) const REPEATED_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The limits a server applies; see the constants for each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_line_bytes: usize,
    pub(crate) auth_timeout: Duration,
    pub(crate) max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line_bytes: MAX_LINE_BYTES,
            auth_timeout: AUTH_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// Who is at the other end of a connection, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// An ACP client (an editor, Boitata's orchestrator) talking to the agent.
    Client,
    /// An agent answering Boitata's client.
    Agent,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Peer::Client => "the client",
            Peer::Agent => "the agent",
        })
    }
}

/// A reader that fails (`InvalidData`) once a line grows past `max_line_bytes`, so the
/// line reader above it never holds more than that plus one read's worth. Once failed,
/// it stays failed.
pub(crate) struct LineLimitedReader<R> {
    inner: R,
    max_line_bytes: usize,
    peer: Peer,
    /// Bytes read since the last newline.
    line_bytes: usize,
    failed: bool,
}

impl<R> LineLimitedReader<R> {
    pub(crate) fn new(inner: R, max_line_bytes: usize, peer: Peer) -> Self {
        LineLimitedReader {
            inner,
            max_line_bytes,
            peer,
            line_bytes: 0,
            failed: false,
        }
    }

    fn too_long(&self) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} sent a line longer than {} bytes (the limit): closing the connection",
                self.peer, self.max_line_bytes
            ),
        )
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineLimitedReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.failed {
            return Poll::Ready(Err(self.too_long()));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let mut line_bytes = this.line_bytes;
        let mut segments = buf.filled()[before..].split(|b| *b == b'\n').peekable();
        while let Some(segment) = segments.next() {
            line_bytes += segment.len();
            if line_bytes > this.max_line_bytes {
                // The connection ends with this error, and serve_tcp logs it.
                this.failed = true;
                return Poll::Ready(Err(this.too_long()));
            }
            // A segment followed by another ended at a newline: a new line starts.
            if segments.peek().is_some() {
                line_bytes = 0;
            }
        }
        this.line_bytes = line_bytes;
        Poll::Ready(Ok(()))
    }
}

/// Counts a repeated occurrence (an accept failure, a refused connection) and says when
/// to log it: the first at once, then at most once per interval with the number
/// left unlogged since.
#[derive(Debug)]
pub(crate) struct LogThrottle {
    interval: Duration,
    last_logged: Option<Instant>,
    unlogged: u64,
}

impl LogThrottle {
    pub(crate) fn new(interval: Duration) -> Self {
        LogThrottle {
            interval,
            last_logged: None,
            unlogged: 0,
        }
    }

    /// One occurrence at `now`: `Some(n)` when it should be logged, `n` being how many
    /// earlier ones were not; `None` when it should only be counted.
    pub(crate) fn occurred(&mut self, now: Instant) -> Option<u64> {
        match self.last_logged {
            Some(last) if now.saturating_duration_since(last) < self.interval => {
                self.unlogged += 1;
                None
            }
            _ => {
                self.last_logged = Some(now);
                Some(std::mem::take(&mut self.unlogged))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    async fn read_all(input: &[u8], max_line_bytes: usize) -> std::io::Result<Vec<u8>> {
        let mut reader = LineLimitedReader::new(input, max_line_bytes, Peer::Client);
        let mut out = Vec::new();
        // Small reads, so lines straddle reads.
        let mut chunk = [0u8; 3];
        loop {
            let n = reader.read(&mut chunk).await?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&chunk[..n]);
        }
    }

    #[tokio::test]
    async fn lines_up_to_the_limit_pass_whole() {
        let input = b"12345\n1\n\n12345\n1234";
        assert_eq!(read_all(input, 5).await.unwrap(), input);
    }

    #[tokio::test]
    async fn a_line_past_the_limit_fails_even_across_reads() {
        let err = read_all(b"12345\n123456\n", 5).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("longer than 5 bytes"), "{err}");
        // No newline at all.
        assert!(read_all(&[b'x'; 100], 5).await.is_err());
    }

    #[test]
    fn a_repeated_occurrence_is_logged_once_per_interval_with_a_count() {
        let mut throttle = LogThrottle::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(throttle.occurred(start), Some(0));
        for i in 1..360 {
            assert_eq!(throttle.occurred(start + Duration::from_millis(i)), None);
        }
        assert_eq!(
            throttle.occurred(start + Duration::from_secs(10)),
            Some(359)
        );
        assert_eq!(throttle.occurred(start + Duration::from_secs(11)), None);
    }
}
