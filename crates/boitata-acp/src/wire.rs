//! The wire under both sides of a connection: newline-delimited JSON-RPC over a byte
//! stream, read line by line with a cap ([`LineLimitedReader`]) and written a line at
//! a time.
//!
//! A line that cannot be a JSON-RPC message is still handed on, so that the protocol
//! answers it (`-32700`, parse error) and the connection goes on; but a long one is
//! cut to its first [`MAX_ECHO_BYTES`] first, because the answer quotes the line: a
//! 1 MiB bad line must not come back as a 1 MiB error. A line that is not UTF-8 (the
//! JSON-RPC text must be) gets the same answer, where reading it as text would
//! otherwise end the connection.

use agent_client_protocol::Lines;
use futures::{Sink, Stream};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::limits::{LineLimitedReader, Peer};

/// The most bytes of a bad line quoted back in the parse error.
pub const MAX_ECHO_BYTES: usize = 128;

/// A line transport on `stream`: lines longer than `max_line_bytes` end it with an
/// `InvalidData` error naming `peer`; bad lines are passed on as [`wire_line`] says.
pub(crate) fn line_transport<S>(
    stream: S,
    max_line_bytes: usize,
    peer: Peer,
) -> Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read, write) = tokio::io::split(stream);
    let reader = BufReader::new(LineLimitedReader::new(read, max_line_bytes, peer));
    let incoming = futures::stream::unfold(reader, |mut reader| async move {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => None,
            Ok(_) => Some((Ok(wire_line(line)), reader)),
            Err(e) => Some((Err(e), reader)),
        }
    });
    let outgoing = futures::sink::unfold(write, |mut write, line: String| async move {
        // One write per line, as the crate's own writer does.
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        write.write_all(&bytes).await?;
        write.flush().await?;
        Ok::<_, std::io::Error>(write)
    });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// One line as read (its newline, and a `\r` before it, removed) as the text the
/// protocol parses: unchanged when it is UTF-8 and either short or valid JSON;
/// otherwise its first [`MAX_ECHO_BYTES`] (lossily decoded) followed by a note that
/// keeps it invalid JSON, so the protocol answers `-32700` quoting only that.
pub(crate) fn wire_line(mut line: Vec<u8>) -> String {
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    }
    let total = line.len();
    match String::from_utf8(line) {
        Ok(text) => {
            if text.len() <= MAX_ECHO_BYTES
                || serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok()
            {
                text
            } else {
                let mut end = MAX_ECHO_BYTES;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                format!("{}… ({total} bytes, not JSON)", &text[..end])
            }
        }
        Err(e) => {
            let bytes = e.into_bytes();
            let head = &bytes[..bytes.len().min(MAX_ECHO_BYTES)];
            // Nothing appended after an unfinished value or string can complete it:
            // the result is never valid JSON.
            format!(
                "{}… ({total} bytes, not valid UTF-8)",
                String::from_utf8_lossy(head)
            )
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parses(text: &str) -> bool {
        serde_json::from_str::<serde_json::Value>(text).is_ok()
    }

    #[test]
    fn good_lines_pass_unchanged() {
        let message = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"t":"{}"}}}}"#,
            "é".repeat(1000)
        );
        assert_eq!(wire_line(format!("{message}\r\n").into_bytes()), message);
        assert_eq!(wire_line(b"not json\n".to_vec()), "not json");
    }

    #[test]
    fn long_bad_lines_are_cut_and_stay_invalid() {
        let line = format!("{{\"a\": \"{}", "€".repeat(400_000));
        let wired = wire_line(line.into_bytes());
        assert!(wired.len() < MAX_ECHO_BYTES + 64, "{}", wired.len());
        assert!(wired.ends_with("bytes, not JSON)"), "{wired}");
        assert!(!parses(&wired));
    }

    #[test]
    fn lines_that_are_not_utf8_become_invalid_json_text() {
        assert_eq!(
            wire_line(b"\xff\n".to_vec()),
            "\u{fffd}… (1 bytes, not valid UTF-8)"
        );
        // Valid JSON apart from the bad byte: still refused as a whole.
        let almost =
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"t\":\"\xff\"}}".to_vec();
        assert!(!parses(&wire_line(almost)));
        let long: Vec<u8> = std::iter::repeat_n(0xfe, 1 << 20).collect();
        let wired = wire_line(long);
        assert!(wired.len() < 4 * MAX_ECHO_BYTES, "{}", wired.len());
    }
}
