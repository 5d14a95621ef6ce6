//! Secret redaction: every string that leaves a run (events, logs, tool output shown
//! to people) passes through a [`Redactor`] first.

use std::sync::Arc;

use regex::Regex;

/// The text that replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Replaces known secret values, and strings shaped like common API keys, with
/// [`REDACTED`]. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Arc<Vec<String>>,
    patterns: Arc<Vec<Regex>>,
}

impl Redactor {
    /// A redactor for these exact values (values shorter than 6 bytes are ignored: they
    /// would match ordinary text) plus the built-in key shapes (`sk-…`, `sk-ant-…`,
    /// `Bearer …`).
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(Into::into)
            .filter(|s| s.len() >= 6)
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        let patterns = [
            r"sk-(?:ant-)?[A-Za-z0-9_\-]{16,}",
            r"(?i)bearer\s+[A-Za-z0-9._~+/=\-]{12,}",
        ]
        .iter()
        .filter_map(|p| Regex::new(p).ok())
        .collect();
        Redactor {
            secrets: Arc::new(secrets),
            patterns: Arc::new(patterns),
        }
    }

    /// This redactor plus more exact values.
    pub fn with_secrets<I, S>(&self, more: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let all: Vec<String> = self
            .secrets
            .iter()
            .cloned()
            .chain(more.into_iter().map(Into::into))
            .collect();
        Redactor::new(all)
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in self.secrets.iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), REDACTED);
            }
        }
        for pattern in self.patterns.iter() {
            if pattern.is_match(&out) {
                out = pattern.replace_all(&out, REDACTED).into_owned();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_values_and_key_shapes() {
        let r = Redactor::new(["hunter2-token"]);
        assert_eq!(r.redact("a hunter2-token b"), "a [REDACTED] b");
        assert_eq!(
            r.redact("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv"),
            "OPENAI_API_KEY=[REDACTED]"
        );
        assert_eq!(r.redact("nothing here"), "nothing here");
    }
}
