//! A command's output on its way to `exec_output` events: text split only between
//! lines (or UTF-8 characters, for a very long line), and the tail that becomes the
//! node's output. Every `exec` handler, on the host or in a sandbox, relays output this
//! way.

use boitata_tools::process::utf8_prefix_len;

use super::EXEC_OUTPUT_TAIL_BYTES;

/// The most bytes of an unfinished line held back before they go out anyway (a secret
/// written in pieces is masked whole only within this many bytes of its line).
pub const EXEC_OUTPUT_LINE_HOLD_BYTES: usize = 4096;

/// One output stream of a command (stdout or stderr): bytes in as they are read, text
/// out for `exec_output` events in whole lines (a line ends at `\n` or `\r`), so that
/// the redactor sees a secret whole even when the command wrote it in two pieces; a
/// line longer than [`EXEC_OUTPUT_LINE_HOLD_BYTES`] goes out in pieces, never splitting
/// a UTF-8 character; and the last [`EXEC_OUTPUT_TAIL_BYTES`] bytes kept.
///
/// ```
/// use boitata_blueprint::host::ExecOutputBuffer;
///
/// let mut output = ExecOutputBuffer::default();
/// let e = "é".as_bytes();
/// assert_eq!(output.push(&[b'a', e[0]]).as_deref(), None);
/// assert_eq!(output.push(&[e[1], b'b', b'\n', b'c']).as_deref(), Some("aéb\n"));
/// assert_eq!(output.finish().as_deref(), Some("c"));
/// assert_eq!(output.into_tail(), "aéb\nc".as_bytes());
/// ```
#[derive(Debug, Default)]
pub struct ExecOutputBuffer {
    /// The line not ended yet (or bytes of a character split across reads), held for
    /// the next read.
    pending: Vec<u8>,
    /// The last [`EXEC_OUTPUT_TAIL_BYTES`] bytes.
    tail: Vec<u8>,
}

impl ExecOutputBuffer {
    /// Takes `bytes` just read. Returns the text to emit now: everything up to the
    /// end of the last complete line, or, when the unfinished line has reached
    /// [`EXEC_OUTPUT_LINE_HOLD_BYTES`], up to the last complete character (invalid
    /// bytes become U+FFFD); `None` when all of it waits for the rest of its line.
    pub fn push(&mut self, bytes: &[u8]) -> Option<String> {
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > EXEC_OUTPUT_TAIL_BYTES {
            let cut = self.tail.len() - EXEC_OUTPUT_TAIL_BYTES;
            self.tail.drain(..cut);
        }
        self.pending.extend_from_slice(bytes);
        let line_end = self
            .pending
            .iter()
            .rposition(|b| matches!(b, b'\n' | b'\r'))
            .map_or(0, |i| i + 1);
        // A line end is ASCII: what comes before it ends on a whole character.
        let complete = if self.pending.len() - line_end >= EXEC_OUTPUT_LINE_HOLD_BYTES {
            utf8_prefix_len(&self.pending)
        } else {
            line_end
        };
        if complete == 0 {
            return None;
        }
        let ready: Vec<u8> = self.pending.drain(..complete).collect();
        Some(String::from_utf8_lossy(&ready).into_owned())
    }

    /// At the end of the stream: the text still held back (the last line when it has
    /// no line end; a character the stream cut short, as U+FFFD), or `None`.
    pub fn finish(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let rest = std::mem::take(&mut self.pending);
        Some(String::from_utf8_lossy(&rest).into_owned())
    }

    /// The last [`EXEC_OUTPUT_TAIL_BYTES`] bytes pushed.
    pub fn into_tail(self) -> Vec<u8> {
        self.tail
    }
}

#[cfg(test)]
mod tests {
    use super::utf8_prefix_len;

    #[test]
    fn split_characters_wait_for_their_rest() {
        let e = "é".as_bytes();
        assert_eq!(utf8_prefix_len(&[b'a', e[0]]), 1);
        assert_eq!(utf8_prefix_len(&[b'a', e[0], e[1]]), 3);
        assert_eq!(utf8_prefix_len(&[0xff, b'a']), 2);
        // An invalid byte before the start of a split character.
        assert_eq!(utf8_prefix_len(&[0xff, 0xe4, 0xb8]), 1);
        assert_eq!(utf8_prefix_len(&[0xe4, 0xb8]), 0);
        // Continuation bytes with no lead, and a lead that cannot start a character.
        assert_eq!(utf8_prefix_len(&[b'a', 0x80, 0x80, 0x80]), 4);
        assert_eq!(utf8_prefix_len(&[b'a', 0xff]), 2);
    }

    #[test]
    fn an_invalid_byte_next_to_a_split_character_is_the_only_replacement() {
        let mut output = super::ExecOutputBuffer::default();
        let first = output.push(b"\xff\xe4\xb8");
        let second = output.push(b"\x80 two\n");
        assert_eq!(first.as_deref(), None);
        assert_eq!(second.as_deref(), Some("\u{FFFD}\u{4E00} two\n"));
        assert_eq!(output.finish(), None);
    }

    #[test]
    fn a_line_waits_for_its_end_and_a_long_one_goes_out_on_whole_characters() {
        let mut output = super::ExecOutputBuffer::default();
        assert_eq!(output.push(b"my-s").as_deref(), None);
        assert_eq!(output.push(b"ecret\rnext").as_deref(), Some("my-secret\r"));
        assert_eq!(output.finish().as_deref(), Some("next"));

        let mut output = super::ExecOutputBuffer::default();
        let long = "\u{e9}".repeat(super::EXEC_OUTPUT_LINE_HOLD_BYTES / 2);
        let bytes = long.as_bytes();
        // One byte short of the hold (and half a character): still held.
        assert_eq!(output.push(&bytes[..bytes.len() - 1]).as_deref(), None);
        assert_eq!(output.push(&bytes[bytes.len() - 1..]), Some(long));
        assert_eq!(output.finish(), None);
    }
}
