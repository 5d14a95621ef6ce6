//! The egress proxy alone, on loopback (no daemon): `CONNECT` tunnels, the TLS SNI
//! check, refusals, and one `egress` event per decision.

use std::sync::Arc;

use boitata_orchestrator::egress::{EgressPolicy, EgressProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::emitter;

/// An echo server on loopback; its port.
async fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = stream.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    port
}

/// A real TLS ClientHello naming `server_name` (made by rustls's client).
fn client_hello(server_name: &str) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(server_name.to_owned()).unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    hello
}

/// Opens a tunnel to `target` through the proxy; the status line and the stream.
async fn connect(proxy: &EgressProxy, target: &str) -> (String, TcpStream) {
    let mut stream = TcpStream::connect(proxy.address()).await.unwrap();
    stream
        .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        // Closed (or reset: a client it does not serve) before a whole head.
        if !matches!(stream.read(&mut byte).await, Ok(1)) {
            break;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let status = text.lines().next().unwrap_or_default().to_owned();
    (status, stream)
}

async fn read_to_end(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_end(&mut out),
    )
    .await
    .expect("the tunnel neither answered nor closed");
    out
}

#[tokio::test]
async fn tunnels_carry_tls_whose_server_name_is_the_connect_host_and_nothing_else() {
    let port = echo_server().await;
    let (emitter, events) = emitter("proxy-test");
    let policy = EgressPolicy::new(
        &[format!("localhost:{port}"), format!("127.0.0.1:{port}")],
        false,
    )
    .unwrap();
    let proxy = EgressProxy::start(
        "127.0.0.1".parse().unwrap(),
        policy,
        emitter,
        Some("box".into()),
    )
    .await
    .unwrap();

    // Not a client it serves yet: closed at once.
    let (status, _) = connect(&proxy, &format!("localhost:{port}")).await;
    assert_eq!(status, "");
    proxy.allow_client("127.0.0.1".parse().unwrap());

    // A ClientHello for the host the tunnel names goes through (the echo comes back).
    let hello = client_hello("localhost");
    let (status, mut tunnel) = connect(&proxy, &format!("localhost:{port}")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    tunnel.write_all(&hello).await.unwrap();
    let mut echoed = vec![0u8; hello.len()];
    tunnel.read_exact(&mut echoed).await.unwrap();
    assert_eq!(echoed, hello);
    drop(tunnel);

    // A ClientHello for another name: the tunnel is closed, nothing reaches the server.
    let (status, mut tunnel) = connect(&proxy, &format!("localhost:{port}")).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    tunnel
        .write_all(&client_hello("evil.example"))
        .await
        .unwrap();
    assert_eq!(read_to_end(&mut tunnel).await, Vec::<u8>::new());

    // A port the policy does not name: 403 with the reason.
    let (status, mut refused) = connect(&proxy, &format!("127.0.0.1:{}", port ^ 1)).await;
    assert_eq!(status, "HTTP/1.1 403 Forbidden");
    let body = String::from_utf8_lossy(&read_to_end(&mut refused).await).into_owned();
    assert!(
        body.contains("not in the node's egress allow list"),
        "{body}"
    );

    // One event per decision (the tunnel's when it closed).
    for _ in 0..50 {
        if events.egress().len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut egress = events.egress();
    egress.sort_by_key(|e| (e.2, e.1));
    assert_eq!(egress.len(), 3, "{egress:?}");
    let sni = egress
        .iter()
        .find(|e| !e.2 && e.0 == "localhost")
        .unwrap_or_else(|| panic!("{egress:?}"));
    assert!(sni.3.contains("\"evil.example\""), "{}", sni.3);
    assert!(egress.iter().any(|e| !e.2 && e.1 == port ^ 1), "{egress:?}");
    let allowed = egress.iter().find(|e| e.2).unwrap();
    assert_eq!((allowed.0.as_str(), allowed.1), ("localhost", port));
    assert!(
        allowed.3.contains(&format!("localhost:{port}")),
        "{}",
        allowed.3
    );
}

#[tokio::test]
async fn plain_http_goes_to_the_checked_host_whatever_host_header_the_client_wrote() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/page"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("the page"))
        .mount(&server)
        .await;
    let port = server.address().port();
    let (emitter, events) = emitter("proxy-http-test");
    let policy = EgressPolicy::new(&[format!("127.0.0.1:{port}")], false).unwrap();
    let proxy = EgressProxy::start("127.0.0.1".parse().unwrap(), policy, emitter, None)
        .await
        .unwrap();
    proxy.allow_client("127.0.0.1".parse().unwrap());

    let mut stream = TcpStream::connect(proxy.address()).await.unwrap();
    stream
        .write_all(
            format!(
                "GET http://127.0.0.1:{port}/page HTTP/1.1\r\nHost: evil.example\r\n\
                 Proxy-Authorization: Basic c2VjcmV0\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = String::from_utf8_lossy(&read_to_end(&mut stream).await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("the page"), "{answer}");

    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    let headers = &received[0].headers;
    assert_eq!(headers["host"], format!("127.0.0.1:{port}").as_str());
    assert!(headers.get("proxy-authorization").is_none(), "{headers:?}");

    for _ in 0..50 {
        if !events.egress().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let egress = events.egress();
    assert_eq!(egress.len(), 1, "{egress:?}");
    let (host, p, allowed, _, up, down) = &egress[0];
    assert_eq!((host.as_str(), *p, *allowed), ("127.0.0.1", port, true));
    assert!(*up > 0 && *down > 0, "{egress:?}");
}
