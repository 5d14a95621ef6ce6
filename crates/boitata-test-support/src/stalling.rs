//! Servers whose streams misbehave in time: one stops mid-answer (idle timeouts), one
//! never ends (size caps and total timeouts).

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

/// Starts a server on loopback that answers every request with a 200
/// `text/event-stream` and then writes `piece` again and again, forever, waiting
/// `interval` between two writes (`Duration::ZERO`: as fast as the client reads).
/// Returns its base URL, `http://127.0.0.1:PORT`.
///
/// A model server that never finishes: with a short `interval` no idle timeout fires.
///
/// # Errors
/// When no loopback port can be bound.
pub async fn endless_sse_server(piece: String, interval: Duration) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let piece = piece.clone();
            tokio::spawn(async move {
                let mut request = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            cache-control: no-cache\r\nconnection: close\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                while socket.write_all(piece.as_bytes()).await.is_ok() {
                    if !interval.is_zero() {
                        tokio::time::sleep(interval).await;
                    }
                }
            });
        }
    });
    Ok(format!("http://{address}"))
}
