//! The per-run secret a client must present before any session starts.

use subtle::ConstantTimeEq;

/// A secret held by the server. Its `Debug` never shows the value.
#[derive(Clone)]
pub(crate) struct RunSecret(String);

impl std::fmt::Debug for RunSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunSecret([REDACTED])")
    }
}

impl RunSecret {
    pub(crate) fn new(value: String) -> Self {
        RunSecret(value)
    }

    /// The value (for redaction lists only).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// True when `presented` is the secret. The comparison takes the same time
    /// wherever the first difference is (only the length can show through).
    pub(crate) fn matches(&self, presented: &str) -> bool {
        self.0.as_bytes().ct_eq(presented.as_bytes()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_secret_matches() {
        let secret = RunSecret::new("correct horse".into());
        assert!(secret.matches("correct horse"));
        assert!(!secret.matches("correct hors"));
        assert!(!secret.matches("correct horsf"));
        assert!(!secret.matches(""));
        assert!(!format!("{secret:?}").contains("horse"));
    }
}
