//! What a client may cost the agent before it authenticates: an over-long line, an idle
//! unauthenticated connection and one connection too many are all closed, and a good
//! client is still served.

use std::net::SocketAddr;
use std::time::Duration;

use boitata_acp::{run_prompt_at, PromptOutcome, StopReason};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::support::{FakeTurn, RawClient, TestAgent, PATIENCE};

const SECRET: &str = "the-run-secret-0123456789";

/// Reads until the agent closes the connection; returns what it sent first. Panics if
/// the connection is still open after [`PATIENCE`].
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut buf))
            .await
            .expect("the agent kept the connection open");
        match read {
            Ok(0) | Err(_) => return received,
            Ok(n) => received.extend_from_slice(&buf[..n]),
        }
    }
}

/// One turn by a well-behaved client, with the secret when one is given.
async fn good_turn(agent: &TestAgent, secret: Option<&str>) -> PromptOutcome {
    let mut prompt = boitata_acp::Prompt::new("hi", agent.root());
    if let Some(secret) = secret {
        prompt = prompt.secret(secret);
    }
    run_prompt_at(agent.addr, prompt, |_| {}, CancellationToken::new())
        .await
        .unwrap()
}

async fn start_with_line_limit(max_line_bytes: usize) -> TestAgent {
    TestAgent::start_with(
        vec![FakeTurn::Reply("still here", vec![])],
        Some(SECRET),
        |server| server.with_max_line_bytes(max_line_bytes),
    )
    .await
}

#[tokio::test]
async fn a_line_without_end_closes_the_connection_and_the_agent_serves_on() {
    let agent = start_with_line_limit(1024).await;
    let mut stream = TcpStream::connect(agent.addr).await.unwrap();
    // 64 KiB and no newline: the agent must not wait for the end of it.
    let _ = stream.write_all(&[b'x'; 64 * 1024]).await;
    let received = read_until_closed(&mut stream).await;
    assert!(
        received.is_empty(),
        "{}",
        String::from_utf8_lossy(&received)
    );

    let outcome = good_turn(&agent, Some(SECRET)).await;
    assert_eq!(outcome.final_message, "still here");
}

#[tokio::test]
async fn an_over_long_line_is_never_echoed_back() {
    let agent = start_with_line_limit(1024).await;
    let mut stream = TcpStream::connect(agent.addr).await.unwrap();
    let mut line = vec![b'{'; 4096];
    line.push(b'\n');
    let _ = stream.write_all(&line).await;
    let received = read_until_closed(&mut stream).await;
    assert!(
        received.is_empty(),
        "{}",
        String::from_utf8_lossy(&received)
    );

    // A line within the limit that is not JSON still gets its parse error.
    let mut stream = TcpStream::connect(agent.addr).await.unwrap();
    stream.write_all(b"{not json\n").await.unwrap();
    let mut reply = String::new();
    tokio::time::timeout(PATIENCE, BufReader::new(stream).read_line(&mut reply))
        .await
        .expect("no parse error in time")
        .unwrap();
    let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
}

#[tokio::test]
async fn an_unauthenticated_connection_is_closed_after_the_auth_timeout() {
    let agent = TestAgent::start_with(vec![], Some(SECRET), |server| {
        server.with_auth_timeout(Duration::from_millis(300))
    })
    .await;
    let mut authenticated = RawClient::connect(agent.addr).await;
    let init = authenticated.initialize(Some(SECRET)).await;
    assert!(init["result"].is_object(), "{init}");

    // Connects and says nothing.
    let mut idle = TcpStream::connect(agent.addr).await.unwrap();
    assert!(read_until_closed(&mut idle).await.is_empty());
    // Initializes, but never presents the secret.
    let mut stalling = TcpStream::connect(agent.addr).await.unwrap();
    stalling
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n")
        .await
        .unwrap();
    let received = read_until_closed(&mut stalling).await;
    assert!(
        String::from_utf8_lossy(&received).contains("authMethods"),
        "{}",
        String::from_utf8_lossy(&received)
    );

    // The authenticated connection outlives the deadline.
    let session = authenticated.new_session(&agent.root()).await;
    assert!(session["result"]["sessionId"].is_string(), "{session}");
}

/// Retries a turn until a connection slot is free (the agent frees one when it sees
/// the other client's connection end).
async fn good_turn_once_a_slot_frees(agent: &TestAgent) -> PromptOutcome {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let prompt = boitata_acp::Prompt::new("hi", agent.root());
        match run_prompt_at(agent.addr, prompt, |_| {}, CancellationToken::new()).await {
            Ok(outcome) => return outcome,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no connection slot freed in time: {e}"),
        }
    }
}

async fn connect_and_initialize(addr: SocketAddr) -> RawClient {
    let mut client = RawClient::connect(addr).await;
    let init = client.initialize(None).await;
    assert!(init["result"].is_object(), "{init}");
    client
}

#[tokio::test]
async fn a_connection_past_the_cap_is_closed_and_a_slot_frees_when_a_client_leaves() {
    let agent = TestAgent::start_with(vec![FakeTurn::Reply("served", vec![])], None, |server| {
        server.with_max_connections(2)
    })
    .await;
    let first = connect_and_initialize(agent.addr).await;
    let _second = connect_and_initialize(agent.addr).await;

    let mut third = TcpStream::connect(agent.addr).await.unwrap();
    let _ = third
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n")
        .await;
    let received = read_until_closed(&mut third).await;
    assert!(
        received.is_empty(),
        "{}",
        String::from_utf8_lossy(&received)
    );

    drop(first);
    let outcome = good_turn_once_a_slot_frees(&agent).await;
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.final_message, "served");
}

/// Reads one line from `reader` (panics after [`PATIENCE`] or at EOF).
async fn read_reply(reader: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> serde_json::Value {
    let mut reply = String::new();
    let n = tokio::time::timeout(PATIENCE, reader.read_line(&mut reply))
        .await
        .expect("no reply in time")
        .unwrap();
    assert!(n > 0, "the agent closed the connection");
    serde_json::from_str(&reply).unwrap()
}

#[tokio::test]
async fn a_line_that_is_not_utf8_gets_a_parse_error_and_the_connection_goes_on() {
    let agent = start_with_line_limit(4 * 1024 * 1024).await;
    let (read, mut write) = TcpStream::connect(agent.addr).await.unwrap().into_split();
    let mut reader = BufReader::new(read);
    write.write_all(b"\xff\n").await.unwrap();
    let reply = read_reply(&mut reader).await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");

    // 1 MiB of bad text: the answer quotes a short prefix only.
    let mut big = vec![b'x'; 1 << 20];
    big.push(b'\n');
    write.write_all(&big).await.unwrap();
    let mut raw = String::new();
    tokio::time::timeout(PATIENCE, reader.read_line(&mut raw))
        .await
        .expect("no reply in time")
        .unwrap();
    assert!(
        raw.len() < 4 * boitata_acp::MAX_ECHO_BYTES,
        "{} bytes back",
        raw.len()
    );
    let reply: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(reply["error"]["code"], -32700, "{reply}");

    // Valid JSON but for one byte: refused, not run.
    write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"x\":\"\xfe\"}}\n")
        .await
        .unwrap();
    let reply = read_reply(&mut reader).await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");

    // The same connection is still served.
    write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n")
        .await
        .unwrap();
    let reply = read_reply(&mut reader).await;
    assert_eq!(reply["id"], 8, "{reply}");
    assert!(reply["result"]["authMethods"].is_array(), "{reply}");
}

#[tokio::test]
async fn boitatas_client_closes_on_a_20_mib_line_from_the_agent() {
    // A fake agent that answers anything with a 20 MiB line (and keeps it coming).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let agent = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        let _ = lines.next_line().await;
        let chunk = vec![b'a'; 1 << 20];
        let _ = write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":\"")
            .await;
        for _ in 0..20 {
            if write.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = write.write_all(b"\"}\n").await;
        // Hold the connection: only the client's cap can end the exchange.
        tokio::time::sleep(PATIENCE * 2).await;
    });
    let prompt = boitata_acp::Prompt::new("hi", "/tmp");
    let error = tokio::time::timeout(
        PATIENCE,
        run_prompt_at(addr, prompt, |_| {}, CancellationToken::new()),
    )
    .await
    .expect("the client waited for the end of the line")
    .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("the agent sent a line longer than 16777216 bytes"),
        "{message}"
    );
    agent.abort();
}
