//! An [`OutputSink`] that streams a command's output as `exec_output` events and keeps
//! the tail of its stdout (the node's output) and of its stderr (for failures).

use boitata_blueprint::host::EXEC_OUTPUT_TAIL_BYTES;
use boitata_core::{Emitter, EventPayload, OutputStream};

use crate::sandbox::OutputSink;

/// Emits `exec_output` for node `node`, splitting only between UTF-8 characters.
pub(crate) struct EventOutput {
    emitter: Emitter,
    node: String,
    stdout: Stream,
    stderr: Stream,
}

#[derive(Default)]
struct Stream {
    /// Bytes of a character split across chunks, held for the next chunk.
    pending: Vec<u8>,
    /// The last [`EXEC_OUTPUT_TAIL_BYTES`] bytes.
    tail: Vec<u8>,
}

impl EventOutput {
    pub(crate) fn new(emitter: Emitter, node: impl Into<String>) -> Self {
        EventOutput {
            emitter,
            node: node.into(),
            stdout: Stream::default(),
            stderr: Stream::default(),
        }
    }

    /// Emits what is still held back; returns the tails of stdout and stderr.
    pub(crate) fn finish(mut self) -> (String, String) {
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let pending = std::mem::take(&mut self.stream(stream).pending);
            if !pending.is_empty() {
                self.emit(stream, &pending);
            }
        }
        (
            String::from_utf8_lossy(&self.stdout.tail).into_owned(),
            String::from_utf8_lossy(&self.stderr.tail).into_owned(),
        )
    }

    fn stream(&mut self, stream: OutputStream) -> &mut Stream {
        match stream {
            OutputStream::Stdout => &mut self.stdout,
            OutputStream::Stderr => &mut self.stderr,
        }
    }

    fn emit(&self, stream: OutputStream, bytes: &[u8]) {
        self.emitter.emit_or_log(
            Some(&self.node),
            EventPayload::ExecOutput {
                stream,
                chunk: String::from_utf8_lossy(bytes).into_owned(),
            },
        );
    }
}

impl OutputSink for EventOutput {
    fn output(&mut self, stream: OutputStream, chunk: &[u8]) {
        let state = self.stream(stream);
        state.tail.extend_from_slice(chunk);
        if state.tail.len() > EXEC_OUTPUT_TAIL_BYTES {
            let cut = state.tail.len() - EXEC_OUTPUT_TAIL_BYTES;
            state.tail.drain(..cut);
        }
        state.pending.extend_from_slice(chunk);
        let complete = utf8_prefix_len(&state.pending);
        if complete == 0 {
            return;
        }
        let ready: Vec<u8> = state.pending.drain(..complete).collect();
        self.emit(stream, &ready);
    }
}

/// The length of `bytes` without a trailing incomplete UTF-8 sequence (invalid bytes
/// count as complete; they become U+FFFD).
fn utf8_prefix_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use boitata_core::event::SinkError;
    use boitata_core::{Event, EventSink, Redactor};

    use super::*;

    #[derive(Default)]
    struct Chunks(Mutex<Vec<String>>);
    impl EventSink for Chunks {
        fn accept(&self, event: &Event) -> Result<(), SinkError> {
            if let EventPayload::ExecOutput { chunk, .. } = &event.payload {
                self.0.lock().unwrap().push(chunk.clone());
            }
            Ok(())
        }
    }

    #[test]
    fn characters_split_across_chunks_are_emitted_whole() {
        let chunks = Arc::new(Chunks::default());
        let emitter = Emitter::new("r", Some(chunks.clone()), Redactor::default());
        let mut out = EventOutput::new(emitter, "n");
        let e = "é".as_bytes();
        out.output(OutputStream::Stdout, &[b'a', e[0]]);
        out.output(OutputStream::Stdout, &[e[1], b'b']);
        out.output(OutputStream::Stderr, b"err");
        let (stdout, stderr) = out.finish();
        assert_eq!(stdout, "aéb");
        assert_eq!(stderr, "err");
        assert_eq!(*chunks.0.lock().unwrap(), vec!["a", "éb", "err"]);
    }
}
