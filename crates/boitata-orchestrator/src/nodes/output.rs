//! An [`OutputSink`] that streams a command's output as `exec_output` events and keeps
//! the tail of its stdout (the node's output) and of its stderr (for failures).

use boitata_blueprint::host::ExecOutputBuffer;
use boitata_core::{Emitter, EventPayload, OutputStream};

use crate::sandbox::OutputSink;

/// Emits `exec_output` for node `node`, splitting only between UTF-8 characters.
pub(crate) struct EventOutput {
    emitter: Emitter,
    node: String,
    stdout: ExecOutputBuffer,
    stderr: ExecOutputBuffer,
}

impl EventOutput {
    pub(crate) fn new(emitter: Emitter, node: impl Into<String>) -> Self {
        EventOutput {
            emitter,
            node: node.into(),
            stdout: ExecOutputBuffer::default(),
            stderr: ExecOutputBuffer::default(),
        }
    }

    /// Emits what is still held back; returns the tails of stdout and stderr.
    pub(crate) fn finish(mut self) -> (String, String) {
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            if let Some(chunk) = self.stream(stream).finish() {
                self.emit(stream, chunk);
            }
        }
        (
            String::from_utf8_lossy(&self.stdout.into_tail()).into_owned(),
            String::from_utf8_lossy(&self.stderr.into_tail()).into_owned(),
        )
    }

    fn stream(&mut self, stream: OutputStream) -> &mut ExecOutputBuffer {
        match stream {
            OutputStream::Stdout => &mut self.stdout,
            OutputStream::Stderr => &mut self.stderr,
        }
    }

    fn emit(&self, stream: OutputStream, chunk: String) {
        self.emitter
            .emit_or_log(Some(&self.node), EventPayload::ExecOutput { stream, chunk });
    }
}

impl OutputSink for EventOutput {
    fn output(&mut self, stream: OutputStream, chunk: &[u8]) {
        if let Some(text) = self.stream(stream).push(chunk) {
            self.emit(stream, text);
        }
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
        out.output(OutputStream::Stdout, &[b'a', b'\n', e[0]]);
        out.output(OutputStream::Stdout, &[e[1], b'b']);
        out.output(OutputStream::Stderr, b"err");
        let (stdout, stderr) = out.finish();
        assert_eq!(stdout, "a\néb");
        assert_eq!(stderr, "err");
        assert_eq!(*chunks.0.lock().unwrap(), vec!["a\n", "éb", "err"]);
    }

    /// A command that writes a secret in two pieces (two writes, two reads) must not
    /// get it into `exec_output` events half by half, past the redactor.
    #[test]
    fn a_secret_written_in_two_pieces_is_masked_whole() {
        let chunks = Arc::new(Chunks::default());
        let redactor = Redactor::new(["my-custom-secret-value-42"]);
        let emitter = Emitter::new("r", Some(chunks.clone()), redactor);
        let mut out = EventOutput::new(emitter, "n");
        out.output(OutputStream::Stdout, b"key: my-custom-s");
        out.output(OutputStream::Stdout, b"ecret-value-42\nmore");
        out.finish();
        let emitted = chunks.0.lock().unwrap().concat();
        assert!(!emitted.contains("my-custom-s"), "{emitted}");
        assert_eq!(emitted, "key: [REDACTED]\nmore");
    }
}
