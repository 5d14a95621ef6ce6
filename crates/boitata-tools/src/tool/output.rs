//! Capping what a tool returns to the model.

/// The longest prefix of `text` that is at most `max_bytes` long and ends on a
/// character boundary.
pub(super) fn prefix_at_boundary(text: &str, max_bytes: usize) -> &str {
    let mut end = max_bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

/// Accumulates output lines up to `max_bytes`, counting the bytes of lines that no
/// longer fit.
#[derive(Debug)]
pub(super) struct CappedText {
    text: String,
    max_bytes: usize,
    cut_bytes: u64,
}

impl CappedText {
    pub(super) fn new(max_bytes: usize) -> Self {
        CappedText {
            text: String::new(),
            max_bytes,
            cut_bytes: 0,
        }
    }

    /// Appends `line` whole if it fits (and nothing was cut before); otherwise counts it
    /// as cut. The very first piece is cut at a character boundary rather than
    /// dropped, so there is always something to show. Returns whether it was shown
    /// whole.
    pub(super) fn push(&mut self, line: &str) -> bool {
        if self.cut_bytes == 0 && self.text.len() + line.len() <= self.max_bytes {
            self.text.push_str(line);
            return true;
        }
        if self.cut_bytes == 0 && self.text.is_empty() {
            let prefix = prefix_at_boundary(line, self.max_bytes);
            self.text.push_str(prefix);
            self.cut_bytes += (line.len() - prefix.len()) as u64;
            return false;
        }
        self.cut_bytes += line.len() as u64;
        false
    }

    /// How many bytes were cut so far.
    pub(super) fn cut_bytes(&self) -> u64 {
        self.cut_bytes
    }

    /// Whether anything was kept.
    pub(super) fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The kept text.
    pub(super) fn into_text(self) -> String {
        self.text
    }
}

/// Ends `text` with a newline if it has content and does not end with one.
pub(super) fn ensure_newline(text: &mut String) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
}
