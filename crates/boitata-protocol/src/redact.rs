//! Secret redaction: every string that leaves a run (events, the run store, logs, SSE,
//! and every tool result before it goes back to the model) passes through a
//! [`Redactor`] first.
//!
//! A redactor masks two kinds of secret:
//! - **exact values** it was given: the provider key, the server token, the values of
//!   the variables named in `secrets.env`, a run's agent secret
//!   (`boitata_core::config::Config::redactor` is the one place that
//!   lists them for a run);
//! - **credential shapes** anybody's credentials have, whoever configured them: the
//!   table [`CREDENTIAL_SHAPES`] (provider keys, GitHub, GitLab, AWS, Slack, Stripe,
//!   Google, npm, Hugging Face tokens, JWTs, private-key blocks, `Bearer` headers) and
//!   the password of any URL's userinfo (`https://user:PASSWORD@host` keeps `user`).
//!
//! No maintained crate offers such a pattern set on its own (secret scanners embed
//! theirs), so the table lives here, one entry and one test per shape.
//!
//! ```
//! use boitata_protocol::redact::Redactor;
//! let redactor = Redactor::new(["correct-horse-battery"]);
//! assert_eq!(
//!     redactor.redact("pw=correct-horse-battery url=https://dev:s3cr3t@example.invalid/x.git"),
//!     "pw=[REDACTED] url=https://dev:[REDACTED]@example.invalid/x.git"
//! );
//! ```

use std::sync::{Arc, LazyLock};

use regex::{Regex, RegexSet};

/// The text that replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Values shorter than this many bytes are not redacted as exact values: they would
/// match ordinary text.
pub const MIN_SECRET_BYTES: usize = 6;

/// One credential shape: a name (for docs and tests) and the regular expression that
/// finds it. The whole match is replaced by [`REDACTED`], except a named group
/// `keep` at its start, which stays (`aws_secret_access_key = ` before the value).
#[derive(Debug, Clone, Copy)]
pub struct CredentialShape {
    /// What it is.
    pub name: &'static str,
    /// The pattern (Rust `regex` syntax).
    pub pattern: &'static str,
}

/// The credential shapes every redactor masks, whoever's they are.
pub const CREDENTIAL_SHAPES: &[CredentialShape] = &[
    CredentialShape {
        name: "private key block",
        pattern: r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)",
    },
    CredentialShape {
        name: "URL userinfo password",
        pattern: r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^/\s@]+(?:@)",
    },
    CredentialShape {
        name: "OpenAI or Anthropic API key",
        pattern: r"\bsk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_\-]{16,}",
    },
    CredentialShape {
        name: "Authorization bearer token",
        pattern: r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{12,}",
    },
    CredentialShape {
        name: "GitHub token",
        pattern: r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b",
    },
    CredentialShape {
        name: "GitHub fine-grained token",
        pattern: r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
    },
    CredentialShape {
        name: "GitLab token",
        pattern: r"\bgl(?:pat|dt|ptt|rt|soat|cbt|ft|imt|oas|agent)-[A-Za-z0-9_\-]{20,}",
    },
    CredentialShape {
        name: "AWS access key id",
        pattern: r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
    },
    CredentialShape {
        name: "AWS secret access key assignment",
        pattern: r#"(?i)(?P<keep>aws_secret_access_key["']?\s*[=:]\s*["']?)[A-Za-z0-9/+=]{40}"#,
    },
    CredentialShape {
        name: "Slack token",
        pattern: r"\bxox[abposre]-[0-9A-Za-z\-]{10,}",
    },
    CredentialShape {
        name: "Slack webhook URL",
        pattern: r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+",
    },
    CredentialShape {
        name: "Stripe secret key",
        pattern: r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
    },
    CredentialShape {
        name: "Google API key",
        pattern: r"\bAIza[0-9A-Za-z_\-]{35}",
    },
    CredentialShape {
        name: "npm token",
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
    },
    CredentialShape {
        name: "Hugging Face token",
        pattern: r"\bhf_[A-Za-z0-9]{30,}\b",
    },
    CredentialShape {
        name: "JSON Web Token",
        pattern: r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    },
];

/// [`CREDENTIAL_SHAPES`], compiled once. A pattern that does not compile is a bug the
/// unit tests catch; it is left out rather than panicking at run time.
static COMPILED_SHAPES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    CREDENTIAL_SHAPES
        .iter()
        .filter_map(|shape| Regex::new(shape.pattern).ok())
        .collect()
});

/// All of [`COMPILED_SHAPES`] in one automaton: most text holds no credential, and one
/// pass says so (the hot path: every event string, every tool result).
static ANY_SHAPE: LazyLock<Option<RegexSet>> =
    LazyLock::new(|| RegexSet::new(CREDENTIAL_SHAPES.iter().map(|shape| shape.pattern)).ok());

/// Replaces known secret values, and strings shaped like credentials
/// ([`CREDENTIAL_SHAPES`], URL passwords), with [`REDACTED`]. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Arc<Vec<String>>,
}

impl Redactor {
    /// A redactor for these exact values (values shorter than [`MIN_SECRET_BYTES`] are
    /// ignored: they would match ordinary text) plus the credential shapes.
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(Into::into)
            .filter(|s| s.len() >= MIN_SECRET_BYTES)
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor {
            secrets: Arc::new(secrets),
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
        let matched: Vec<usize> = match ANY_SHAPE.as_ref() {
            Some(set) => set.matches(&out).into_iter().collect(),
            None => (0..COMPILED_SHAPES.len()).collect(),
        };
        for pattern in matched.iter().filter_map(|&i| COMPILED_SHAPES.get(i)) {
            if pattern.is_match(&out) {
                out = pattern
                    .replace_all(&out, |caps: &regex::Captures<'_>| {
                        let keep = caps.name("keep").map_or("", |m| m.as_str());
                        let at = if caps[0].ends_with('@') && !keep.is_empty() {
                            "@"
                        } else {
                            ""
                        };
                        format!("{keep}{REDACTED}{at}")
                    })
                    .into_owned();
            }
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn redact(text: &str) -> String {
        Redactor::default().redact(text)
    }

    #[test]
    fn every_shape_compiles() {
        for shape in CREDENTIAL_SHAPES {
            assert!(Regex::new(shape.pattern).is_ok(), "{}", shape.name);
        }
        assert_eq!(COMPILED_SHAPES.len(), CREDENTIAL_SHAPES.len());
        assert!(ANY_SHAPE.is_some());
    }

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

    #[test]
    fn short_values_are_not_redacted_as_values() {
        let r = Redactor::new(["abc", "12345"]);
        assert_eq!(r.redact("abc 12345"), "abc 12345");
    }

    #[test]
    fn url_userinfo_keeps_the_user_and_masks_the_password() {
        assert_eq!(
            redact("origin\thttps://dev:hunter2pass@example.invalid/x.git (fetch)"),
            "origin\thttps://dev:[REDACTED]@example.invalid/x.git (fetch)"
        );
        assert_eq!(
            redact("postgres://app:p4ss@db:5432/app and redis://:pw123456@cache"),
            "postgres://app:[REDACTED]@db:5432/app and redis://:[REDACTED]@cache"
        );
        // No userinfo: a port, a path with `@`, a plain user.
        for plain in [
            "https://example.invalid:8443/a@b",
            "https://dev@example.invalid/x.git",
            "see https://example.invalid/path",
        ] {
            assert_eq!(redact(plain), plain);
        }
    }

    #[test]
    fn github_tokens() {
        let classic = format!("ghp_{}", "a1B2".repeat(9));
        assert_eq!(redact(&format!("token {classic}.")), "token [REDACTED].");
        let gho = format!("gho_{}", "Z9".repeat(18));
        assert_eq!(redact(&gho), REDACTED);
        let fine = format!("github_pat_11ABCDEFG0_{}", "x".repeat(59));
        assert_eq!(redact(&fine), REDACTED);
        // Too short to be one.
        assert_eq!(redact("ghp_short"), "ghp_short");
    }

    #[test]
    fn gitlab_tokens() {
        assert_eq!(
            redact("PRIVATE-TOKEN: glpat-AbCdEfGhIjKlMnOpQrSt"),
            "PRIVATE-TOKEN: [REDACTED]"
        );
        assert_eq!(redact("gldt-0123456789abcdefghij"), REDACTED);
    }

    #[test]
    fn aws_keys() {
        assert_eq!(
            redact("aws_access_key_id = AKIAIOSFODNN7EXAMPLE"),
            "aws_access_key_id = [REDACTED]"
        );
        assert_eq!(
            redact("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "aws_secret_access_key = [REDACTED]"
        );
        // Lower case or short: not an access key id.
        assert_eq!(redact("akiaiosfodnn7example"), "akiaiosfodnn7example");
    }

    #[test]
    fn slack_tokens_and_webhooks() {
        assert_eq!(
            redact("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
            REDACTED
        );
        assert_eq!(
            redact("url: https://hooks.slack.com/services/T000/B000/XXXXXXXX done"),
            "url: [REDACTED] done"
        );
    }

    #[test]
    fn private_key_blocks_whole_or_cut_off() {
        let block = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(
            redact(&format!("key:\n{block}\nafter")),
            "key:\n[REDACTED]\nafter"
        );
        // A block cut by a `head`: the rest of the text goes.
        assert_eq!(
            redact("x -----BEGIN RSA PRIVATE KEY-----\nMIIEow"),
            "x [REDACTED]"
        );
        assert_eq!(
            redact("-----BEGIN PUBLIC KEY-----"),
            "-----BEGIN PUBLIC KEY-----"
        );
    }

    #[test]
    fn json_web_tokens() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        assert_eq!(redact(&format!("cookie={jwt};")), "cookie=[REDACTED];");
    }

    #[test]
    fn stripe_google_npm_hugging_face() {
        assert_eq!(redact("sk_live_4eC39HqLyjWDarjtT1zdp7dc"), REDACTED);
        assert_eq!(
            redact("key=AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe"),
            "key=[REDACTED]"
        );
        assert_eq!(
            redact("//registry/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789"),
            "//registry/:_authToken=[REDACTED]"
        );
        assert_eq!(redact("hf_abcdefghijklmnopqrstuvwxyzABCDEF"), REDACTED);
    }

    #[test]
    fn bearer_headers() {
        assert_eq!(
            redact("Authorization: Bearer abc.def-ghi_jkl"),
            "Authorization: [REDACTED]"
        );
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let text = "fn main() { let sk = 1; } // see https://example.invalid/docs, 2026-11-30 ok";
        assert_eq!(redact(text), text);
    }
}
