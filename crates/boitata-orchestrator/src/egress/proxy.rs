//! The proxy server: HTTP/1.1 forward proxying and `CONNECT` tunnels with hyper.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use boitata_core::{Emitter, EventPayload};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, HOST};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::EgressPolicy;

/// How long a destination gets to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client gets to send its TLS ClientHello after a `CONNECT`.
const CLIENT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes read while waiting for a complete ClientHello.
const CLIENT_HELLO_MAX_BYTES: usize = 64 * 1024;
/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// Request headers that concern the hop to the proxy, not the destination.
const HOP_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// A running egress proxy for one policy. Stops when dropped or
/// [`stopped`](EgressProxy::stop).
#[derive(Debug)]
pub struct EgressProxy {
    address: SocketAddr,
    clients: Arc<Mutex<HashSet<IpAddr>>>,
    stop: CancellationToken,
}

struct Shared {
    policy: EgressPolicy,
    emitter: Emitter,
    node: Option<String>,
    clients: Arc<Mutex<HashSet<IpAddr>>>,
}

impl EgressProxy {
    /// Starts a proxy on `bind` (an ephemeral port) enforcing `policy`, with one
    /// `egress` event per decision sent to `emitter` as node `node`'s. It serves only
    /// the clients added with [`EgressProxy::allow_client`] (connections from any other
    /// address are closed at once).
    ///
    /// # Errors
    /// The I/O error of binding `bind`.
    pub async fn start(
        bind: IpAddr,
        policy: EgressPolicy,
        emitter: Emitter,
        node: Option<String>,
    ) -> io::Result<EgressProxy> {
        let listener = TcpListener::bind(SocketAddr::new(bind, 0)).await?;
        let address = listener.local_addr()?;
        let clients = Arc::new(Mutex::new(HashSet::new()));
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            policy,
            emitter,
            node,
            clients: clients.clone(),
        });
        tokio::spawn(accept_loop(listener, shared, stop.clone()));
        Ok(EgressProxy {
            address,
            clients,
            stop,
        })
    }

    /// Where the proxy listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The proxy URL for the sandbox's `HTTP_PROXY` and `HTTPS_PROXY`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Serves connections from `client` (a sandbox's address on the run network).
    pub fn allow_client(&self, client: IpAddr) {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(client);
    }

    /// Stops accepting connections and ends every open one.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                tracing::debug!("egress proxy accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let known = shared
            .clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&peer.ip());
        if !known {
            tracing::warn!(%peer, "egress proxy: connection from an address it does not serve, closed");
            continue;
        }
        let shared = shared.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                let stop = stop.clone();
                async move { Ok::<_, hyper::Error>(handle(shared, stop, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            if let Err(e) = conn.await {
                tracing::debug!(%peer, "egress proxy connection: {e}");
            }
        });
    }
}

async fn handle(
    shared: Arc<Shared>,
    stop: CancellationToken,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    if req.method() == Method::CONNECT {
        return connect(shared, stop, req).await;
    }
    forward(shared, req).await
}

/// Host and port of a request target; the default port when the target has none.
fn target(req: &Request<Incoming>, default_port: Option<u16>) -> Option<(String, u16)> {
    let authority = req.uri().authority()?;
    let port = authority.port_u16().or(default_port)?;
    Some((authority.host().to_owned(), port))
}

async fn connect(
    shared: Arc<Shared>,
    stop: CancellationToken,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let Some((host, port)) = target(&req, None) else {
        return text(StatusCode::BAD_REQUEST, "CONNECT needs host:port".into());
    };
    let (upstream, reason) = match shared.open(&host, port).await {
        Ok(opened) => opened,
        Err(refusal) => return refusal,
    };
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(req).await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                tracing::debug!("egress proxy: CONNECT upgrade failed: {e}");
                return;
            }
        };
        let mut client = TokioIo::new(upgraded);
        let (head, sni) = match read_client_hello(&mut client).await {
            Ok(found) => found,
            Err(reason) => {
                shared.event(&host, port, false, &reason, 0, 0);
                return;
            }
        };
        if let Some(sni) = &sni {
            let wanted = host.trim_end_matches('.');
            if !sni.trim_end_matches('.').eq_ignore_ascii_case(wanted) {
                let reason = format!(
                    "the TLS server name {sni:?} is not the CONNECT host {host:?}: tunnel closed"
                );
                shared.event(&host, port, false, &reason, 0, 0);
                return;
            }
        }
        let mut upstream = upstream;
        let mut up = head.len() as u64;
        let mut down = 0;
        let mut reason = reason.clone();
        if let Err(e) = upstream.write_all(&head).await {
            reason = format!("{reason}; the destination closed: {e}");
        } else {
            tokio::select! {
                () = stop.cancelled() => reason = format!("{reason}; closed at the run's end"),
                copied = tokio::io::copy_bidirectional(&mut client, &mut upstream) => match copied {
                    Ok((sent, received)) => {
                        up += sent;
                        down = received;
                    }
                    Err(e) => tracing::debug!("egress tunnel to {host}:{port}: {e}"),
                },
            }
        }
        shared.event(&host, port, true, &reason, up, down);
    });
    Response::new(empty())
}

/// Reads the start of a tunnel: when it is a TLS handshake, until the ClientHello is
/// complete; returns the bytes read (to forward) and the SNI, if any.
async fn read_client_hello<S: AsyncRead + Unpin>(
    client: &mut S,
) -> Result<(Vec<u8>, Option<String>), String> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = async {
        let n = client.read(&mut chunk).await.map_err(|e| e.to_string())?;
        head.extend_from_slice(&chunk[..n]);
        if n == 0 || head.first() != Some(&TLS_HANDSHAKE) {
            // Not TLS (or nothing): nothing to check.
            return Ok(None);
        }
        let mut acceptor = rustls::server::Acceptor::default();
        let mut fed = 0;
        loop {
            let mut unread = &head[fed..];
            let before = unread.len();
            acceptor.read_tls(&mut unread).map_err(|e| e.to_string())?;
            fed += before - unread.len();
            match acceptor.accept() {
                Ok(Some(accepted)) => {
                    return Ok(accepted.client_hello().server_name().map(str::to_owned));
                }
                Ok(None) => {}
                Err((e, _)) => return Err(format!("not a TLS ClientHello: {e}")),
            }
            if head.len() >= CLIENT_HELLO_MAX_BYTES {
                return Err("the TLS ClientHello is too large".to_owned());
            }
            let n = client.read(&mut chunk).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("the client closed before its TLS ClientHello ended".to_owned());
            }
            head.extend_from_slice(&chunk[..n]);
        }
    };
    let sni = tokio::time::timeout(CLIENT_HELLO_TIMEOUT, read)
        .await
        .map_err(|_| format!("no TLS ClientHello within {CLIENT_HELLO_TIMEOUT:?}"))??;
    Ok((head, sni))
}

async fn forward(shared: Arc<Shared>, mut req: Request<Incoming>) -> Response<ProxyBody> {
    if req.uri().scheme_str() != Some("http") {
        return text(
            StatusCode::BAD_REQUEST,
            "this is an egress proxy: send absolute http:// URLs, or CONNECT for https\n".into(),
        );
    }
    let Some((host, port)) = target(&req, Some(80)) else {
        return text(
            StatusCode::BAD_REQUEST,
            "the request URL has no host\n".into(),
        );
    };
    let (stream, reason) = match shared.open(&host, port).await {
        Ok(opened) => opened,
        Err(refusal) => return refusal,
    };
    let counted = Counted::new(stream);
    let (up, down) = (counted.up.clone(), counted.down.clone());
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(counted)).await {
            Ok(pair) => pair,
            Err(e) => {
                let reason = format!("{host}:{port}: {e}");
                shared.event(&host, port, false, &reason, 0, 0);
                return text(StatusCode::BAD_GATEWAY, format!("{reason}\n"));
            }
        };
    {
        let event_shared = shared.clone();
        let (host, reason) = (host.clone(), reason.clone());
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("egress proxy upstream {host}:{port}: {e}");
            }
            event_shared.event(
                &host,
                port,
                true,
                &reason,
                up.load(Ordering::Relaxed),
                down.load(Ordering::Relaxed),
            );
        });
    }
    // Origin-form for the destination; hop headers stay here.
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".to_owned());
    let authority = req.uri().authority().map(|a| a.as_str().to_owned());
    match path.parse() {
        Ok(uri) => *req.uri_mut() = uri,
        Err(_) => return text(StatusCode::BAD_REQUEST, "bad request path\n".into()),
    }
    let headers = req.headers_mut();
    for name in HOP_HEADERS {
        headers.remove(*name);
    }
    // The destination hears the host that was checked, whatever `Host` the client
    // wrote (no reaching another site on the same address by naming it there).
    headers.remove(HOST);
    if let Some(authority) = authority {
        if let Ok(value) = HeaderValue::from_str(&authority) {
            headers.insert(HOST, value);
        }
    }
    headers.insert("connection", HeaderValue::from_static("close"));
    match sender.send_request(req).await {
        Ok(response) => response.map(|body| body.boxed()),
        Err(e) => text(StatusCode::BAD_GATEWAY, format!("{host}:{port}: {e}\n")),
    }
}

async fn dial(address: SocketAddr) -> io::Result<TcpStream> {
    tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer in {CONNECT_TIMEOUT:?}"),
            )
        })?
}

impl Shared {
    /// Decides on `host:port` and connects to the address the decision checked; the
    /// connection and the reason it was allowed, or the refusal to answer (`403`, or
    /// `502` when the destination cannot be reached) with its event sent.
    async fn open(
        &self,
        host: &str,
        port: u16,
    ) -> Result<(TcpStream, String), Response<ProxyBody>> {
        let decision = self.policy.decide(host, port).await;
        let Some(address) = decision.address else {
            self.event(host, port, false, &decision.reason, 0, 0);
            return Err(text(
                StatusCode::FORBIDDEN,
                format!("egress refused: {}\n", decision.reason),
            ));
        };
        match dial(address).await {
            Ok(stream) => Ok((stream, decision.reason)),
            Err(e) => {
                let reason = format!("cannot connect to {address}: {e}");
                self.event(host, port, false, &reason, 0, 0);
                Err(text(StatusCode::BAD_GATEWAY, format!("{reason}\n")))
            }
        }
    }

    fn event(
        &self,
        host: &str,
        port: u16,
        allowed: bool,
        reason: &str,
        bytes_up: u64,
        bytes_down: u64,
    ) {
        self.emitter.emit_or_log(
            self.node.as_deref(),
            EventPayload::Egress {
                host: host.to_owned(),
                port,
                allowed,
                reason: reason.to_owned(),
                bytes_up,
                bytes_down,
            },
        );
    }
}

fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        "content-type",
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    // A refusal ends the client's connection: nothing more goes through it.
    headers.insert("connection", HeaderValue::from_static("close"));
    response
}

fn empty() -> ProxyBody {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

/// A stream that counts the bytes written to it (up) and read from it (down).
struct Counted<S> {
    inner: S,
    up: Arc<AtomicU64>,
    down: Arc<AtomicU64>,
}

impl<S> Counted<S> {
    fn new(inner: S) -> Self {
        Counted {
            inner,
            up: Arc::new(AtomicU64::new(0)),
            down: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        self.down.fetch_add(read as u64, Ordering::Relaxed);
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            self.up.fetch_add(*n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
