//! Provider settings: which API ([`ProviderKind`]), where and how to reach it
//! ([`ProviderConfig`]), and whether to stream ([`StreamMode`]). The `[provider]` table
//! of `boitata.toml`; `boitata_core::config` loads it with the rest.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A provider setting that is not one of its values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// An unknown provider name.
    #[error("unknown provider {0:?}: use openai, anthropic or scripted")]
    UnknownProvider(String),
    /// A `stream` setting (`provider.stream`, `BOITATA_STREAM`, `--stream`) that is
    /// none of `true`, `false`, `auto`.
    #[error("invalid stream setting {0:?}: use true, false or auto")]
    InvalidStream(String),
}

/// Which model API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions (and compatible servers).
    #[default]
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// A replayed script of model turns.
    Scripted,
}

impl ProviderKind {
    /// `openai`, `anthropic` or `scripted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Scripted => "scripted",
        }
    }

    /// Parses [`ProviderKind::as_str`]'s output.
    ///
    /// # Errors
    /// [`SettingError::UnknownProvider`].
    pub fn parse(s: &str) -> Result<Self, SettingError> {
        match s {
            "openai" => Ok(ProviderKind::Openai),
            "anthropic" => Ok(ProviderKind::Anthropic),
            "scripted" => Ok(ProviderKind::Scripted),
            other => Err(SettingError::UnknownProvider(other.to_owned())),
        }
    }

    /// The environment variable holding this provider's API key, if it needs one.
    pub fn api_key_variable(self) -> Option<&'static str> {
        match self {
            ProviderKind::Openai => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Scripted => None,
        }
    }

    /// The model used when none is configured.
    pub fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Openai => "gpt-4.1-mini",
            ProviderKind::Anthropic => "claude-sonnet-4-5",
            ProviderKind::Scripted => "scripted",
        }
    }
}

/// Provider settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderConfig {
    /// Which API.
    pub kind: ProviderKind,
    /// The model (default per provider).
    pub model: Option<String>,
    /// The API's base URL (default: the vendor's).
    pub base_url: Option<String>,
    /// For `scripted`: the script file.
    pub script: Option<PathBuf>,
    /// Idle timeout of a request (humantime, e.g. `120s`): for the connection, the
    /// response headers, and each pause in the streamed answer.
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
    /// The most one request may take in all, retries and the whole streamed answer
    /// included (humantime, default `10m`).
    #[serde(with = "humantime_serde_compat")]
    pub total_timeout: Duration,
    /// Retries for 429 and 5xx.
    pub max_retries: u32,
    /// Whether to ask for a streamed answer: `true`, `false` or `"auto"` (the
    /// default; also `BOITATA_STREAM`).
    pub stream: StreamMode,
    /// The API key: filled from the environment only, never read from a file.
    #[serde(skip)]
    pub api_key: Option<String>,
    /// True when `base_url` came from `BOITATA_BASE_URL`, not from the file.
    #[serde(skip)]
    pub base_url_from_env: bool,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            kind: ProviderKind::default(),
            model: None,
            base_url: None,
            script: None,
            timeout: Duration::from_secs(120),
            total_timeout: Duration::from_secs(600),
            max_retries: 4,
            stream: StreamMode::default(),
            api_key: None,
            base_url_from_env: false,
        }
    }
}

impl ProviderConfig {
    /// The configured model or the provider's default.
    pub fn model_or_default(&self) -> String {
        self.model
            .clone()
            .unwrap_or_else(|| self.kind.default_model().to_owned())
    }
}

/// Whether a provider asks for a streamed answer (`provider.stream`).
///
/// In TOML: `stream = true`, `stream = false` or `stream = "auto"`; in
/// `BOITATA_STREAM` and `--stream`: `true`, `false` or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamMode {
    /// Always stream (`stream: true` in every request).
    Always,
    /// Never stream: one whole JSON answer per request (no text deltas).
    Never,
    /// Stream, but when a server refuses to stream a request that offers tools
    /// (llama.cpp's Python server does), send that request and the run's later ones
    /// without streaming, and say so once in a note event.
    #[default]
    Auto,
}

impl StreamMode {
    /// `true`, `false` or `auto`.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamMode::Always => "true",
            StreamMode::Never => "false",
            StreamMode::Auto => "auto",
        }
    }

    /// Parses `true`, `false` or `auto` (also `yes`/`no`, `on`/`off`, `1`/`0`).
    ///
    /// # Errors
    /// [`SettingError::InvalidStream`] for anything else.
    pub fn parse(text: &str) -> Result<Self, SettingError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok(StreamMode::Always),
            "false" | "no" | "off" | "0" => Ok(StreamMode::Never),
            "auto" => Ok(StreamMode::Auto),
            _ => Err(SettingError::InvalidStream(text.to_owned())),
        }
    }
}

impl Serialize for StreamMode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            StreamMode::Always => serializer.serialize_bool(true),
            StreamMode::Never => serializer.serialize_bool(false),
            StreamMode::Auto => serializer.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for StreamMode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = StreamMode;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false or \"auto\"")
            }

            fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<StreamMode, E> {
                Ok(if value {
                    StreamMode::Always
                } else {
                    StreamMode::Never
                })
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<StreamMode, E> {
                StreamMode::parse(value).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The longest duration a setting may hold: 7 days. Longer ones are refused at load
/// (a deadline centuries away overflows clocks and means "never" anyway).
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Serde helpers for `Duration` as a humantime string (`90s`, `10m`), at most
/// [`MAX_DURATION`](super::MAX_DURATION).
pub mod humantime_serde_compat {
    use std::time::Duration;

    use super::MAX_DURATION;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `d` as humantime.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    /// Reads a humantime string; refuses one longer than [`MAX_DURATION`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        let duration = humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?}: {e} (use e.g. 90s, 10m)"
            ))
        })?;
        if duration > MAX_DURATION {
            return Err(serde::de::Error::custom(format!(
                "duration {text:?} is too long: the most is {} (use e.g. 90s, 10m)",
                humantime::format_duration(MAX_DURATION)
            )));
        }
        Ok(duration)
    }
}
