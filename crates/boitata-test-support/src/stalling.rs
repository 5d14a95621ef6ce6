//! A server whose stream stops mid-answer, for idle-timeout tests.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::sse::{sse_body, SseEvent};

/// Starts a server on loopback that answers every request with a 200
/// `text/event-stream` carrying `events`, then sends nothing more while keeping the
/// connection open (for ten minutes). Returns its base URL, `http://127.0.0.1:PORT`.
///
/// wiremock can only delay a whole response; this fakes a model that stalls after its
/// first tokens.
///
/// # Errors
/// When no loopback port can be bound.
pub async fn stalling_sse_server(events: Vec<SseEvent>) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let body = sse_body(&events);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                // The request itself does not matter; read what has arrived.
                let mut request = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            cache-control: no-cache\r\nconnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_ok()
                    && socket.write_all(body.as_bytes()).await.is_ok()
                {
                    let _ = socket.flush().await;
                    tokio::time::sleep(Duration::from_secs(600)).await;
                }
            });
        }
    });
    Ok(format!("http://{address}"))
}
