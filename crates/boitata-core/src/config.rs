//! Settings: where they come from and what they hold.
//!
//! The first file found wins: `--config FILE`, `$BOITATA_CONFIG`, `./boitata.toml`
//! (unless [`ConfigSearch`] leaves the current directory out, as `boitata-agent`
//! does), then the user config dir (`~/.config/boitata/config.toml` on Linux). No file
//! at all is fine: the defaults apply.
//!
//! The current directory is often a checkout of someone else's repository, so a
//! `./boitata.toml` is not trusted with the API key: when it sets `provider.base_url`,
//! [`Config::check_key_destination`] refuses until the user confirms the URL (see
//! there). Environment variables then override the file:
//! `BOITATA_PROVIDER`, `BOITATA_MODEL`, `BOITATA_BASE_URL`, `BOITATA_STREAM`, `BOITATA_SCRIPT`,
//! `BOITATA_DATA_DIR`, `BOITATA_API_TOKEN`; API keys come from `OPENAI_API_KEY` and
//! `ANTHROPIC_API_KEY` only (never from a file that might be committed).
//!
//! ```toml
//! [provider]
//! kind = "openai"               # openai | anthropic | scripted
//! model = "gpt-4.1-mini"
//! base_url = "http://127.0.0.1:11434/v1"   # any Chat Completions server
//! timeout = "120s"        # idle: connection, headers, each pause in the stream
//! total_timeout = "10m"    # the whole request, retries and streamed answer included
//! max_retries = 4
//! stream = "auto"         # true | false | "auto": stream, or fall back when refused
//!
//! [agent]
//! max_turns = 30
//!
//! [tools]
//! command_timeout = "120s"
//! max_output_bytes = 32768
//!
//! [secrets]
//! env = ["GITHUB_TOKEN"]   # these variables' values are masked everywhere
//! [budget]                 # each limit optional; a run over one fails
//! tokens = 200000
//! requests = 100
//! wall = "30m"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use boitata_protocol::redact::Redactor;

/// All settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The model provider.
    pub provider: ProviderConfig,
    /// The agent loop.
    pub agent: AgentConfig,
    /// Tool limits.
    pub tools: ToolsConfig,
    /// The server.
    pub server: ServerConfig,
    /// More secrets to mask everywhere.
    pub secrets: SecretsConfig,
    /// What a run may spend on the model ([`Budget`](crate::budget::Budget)): the
    /// in-process agent's runs, and blueprint runs whose blueprint sets no `budget:`.
    pub budget: crate::budget::Budget,
    /// Where runs are stored (default: the user data dir).
    pub data_dir: Option<PathBuf>,
    /// The file these settings were read from, if any.
    #[serde(skip)]
    pub source: Option<PathBuf>,
    /// How that file was found.
    #[serde(skip)]
    pub origin: ConfigOrigin,
}

/// How the settings file was found ([`Config::load_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConfigOrigin {
    /// No file: the defaults (or a file read with [`Config::read`] directly).
    #[default]
    Defaults,
    /// Named by the caller (`--config FILE`).
    Explicit,
    /// Named by `$BOITATA_CONFIG`.
    Environment,
    /// `./boitata.toml` in the current directory: possibly an untrusted checkout.
    CurrentDir,
    /// The user config dir.
    UserDir,
}

/// Where [`Config::load_with`] may look for a file besides `--config` and
/// `$BOITATA_CONFIG`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSearch {
    /// The directory searched for `boitata.toml` (`None`: none is), before the user
    /// config dir.
    pub current_dir: Option<PathBuf>,
}

impl ConfigSearch {
    /// `./boitata.toml`, then the user config dir: the CLI's search.
    pub fn with_current_dir() -> Self {
        ConfigSearch {
            current_dir: Some(PathBuf::from(".")),
        }
    }

    /// The user config dir only: for a process whose current directory is an
    /// untrusted checkout (`boitata-agent`).
    pub fn without_current_dir() -> Self {
        ConfigSearch { current_dir: None }
    }
}

impl Default for ConfigSearch {
    fn default() -> Self {
        ConfigSearch::with_current_dir()
    }
}

pub use boitata_provider::config::{ProviderConfig, ProviderKind, SettingError, StreamMode};

/// Agent loop settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// The most model requests in one run of the agent.
    pub max_turns: u32,
    /// Replaces the built-in system prompt.
    pub system_prompt: Option<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_turns: 30,
            system_prompt: None,
        }
    }
}

/// Tool limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// How long a command may run (humantime).
    #[serde(with = "humantime_serde_compat")]
    pub command_timeout: Duration,
    /// The most output a tool returns to the model, in bytes.
    pub max_output_bytes: usize,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        let limits = boitata_tools::tool::ToolLimits::default();
        ToolsConfig {
            command_timeout: limits.command_timeout,
            max_output_bytes: limits.max_output_bytes,
        }
    }
}

/// Server settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Bearer token every request must carry (also `BOITATA_API_TOKEN`).
    pub api_token: Option<String>,
    /// How many runs execute at once; the rest wait as `queued`.
    pub max_concurrent_runs: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            api_token: None,
            max_concurrent_runs: 4,
        }
    }
}

/// Secrets of the user's own, masked like the provider key: in events, the run
/// store, logs, SSE and every tool result before the model sees it.
///
/// ```toml
/// [secrets]
/// env = ["GITHUB_TOKEN", "DATABASE_PASSWORD"]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecretsConfig {
    /// Names of environment variables whose values are secrets.
    pub env: Vec<String>,
    /// Their values, read by [`Config::apply_env`] (never written to a file).
    #[serde(skip)]
    pub values: Vec<String>,
}

/// What can go wrong loading settings.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not valid TOML for these settings.
    #[error("invalid config {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A provider setting that is not one of its values (`provider.kind`,
    /// `provider.stream` and their variables).
    #[error(transparent)]
    Setting(#[from] SettingError),
    /// A config file in the current directory would send the API key elsewhere.
    #[error(
        "{path} (a config file in the current directory) sets provider.base_url = {url:?}, \
         and the key in {variable} would be sent there: a checked-out repository may not \
         choose where your key goes. If you trust that server, confirm it with \
         BOITATA_BASE_URL={url} or pass the file with --config; otherwise remove \
         base_url from it"
    )]
    UntrustedBaseUrl {
        /// The config file.
        path: PathBuf,
        /// The base URL it sets.
        url: String,
        /// The variable holding the key.
        variable: String,
    },
}

/// A view of environment variables. Tests pass a map instead of touching the process
/// environment.
pub trait EnvSource {
    /// The variable's value, if set and non-empty.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl EnvSource for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned().filter(|v| !v.is_empty())
    }
}

impl Config {
    /// Finds and reads the config file (see the module docs), `./boitata.toml`
    /// included, then applies `env`: [`Config::load_with`] and
    /// [`ConfigSearch::with_current_dir`].
    ///
    /// # Errors
    /// [`ConfigError`] when a named file is missing or any file is invalid.
    pub fn load(explicit: Option<&Path>, env: &dyn EnvSource) -> Result<Config, ConfigError> {
        Config::load_with(explicit, env, &ConfigSearch::with_current_dir())
    }

    /// Finds and reads the config file: `explicit`, else `$BOITATA_CONFIG`, else
    /// `boitata.toml` in `search.current_dir` (if any), else the user config file;
    /// then applies `env`. [`Config::origin`] says which was used.
    ///
    /// # Errors
    /// [`ConfigError`] when a named file is missing or any file is invalid.
    pub fn load_with(
        explicit: Option<&Path>,
        env: &dyn EnvSource,
        search: &ConfigSearch,
    ) -> Result<Config, ConfigError> {
        let candidate = match explicit {
            Some(path) => Some((path.to_path_buf(), ConfigOrigin::Explicit)),
            None => env
                .var("BOITATA_CONFIG")
                .map(|p| (PathBuf::from(p), ConfigOrigin::Environment))
                .or_else(|| {
                    let dir = search.current_dir.as_ref()?;
                    let path = dir.join("boitata.toml");
                    path.is_file().then_some((path, ConfigOrigin::CurrentDir))
                })
                .or_else(|| {
                    user_config_file()
                        .filter(|p| p.is_file())
                        .map(|p| (p, ConfigOrigin::UserDir))
                }),
        };
        let mut config = match candidate {
            Some((path, origin)) => Config {
                origin,
                ..Config::read(&path)?
            },
            None => Config::default(),
        };
        config.apply_env(env)?;
        Ok(config)
    }

    /// Whether the API key may go to the configured base URL.
    ///
    /// It may not when a `boitata.toml` found in the current directory (an
    /// untrusted checkout, [`ConfigOrigin::CurrentDir`]) set `provider.base_url` and
    /// there is a key to send: the user confirms by setting `BOITATA_BASE_URL` (to the
    /// same URL, or another) or by naming the file with `--config`.
    ///
    /// # Errors
    /// [`ConfigError::UntrustedBaseUrl`], whose message says both ways to confirm.
    pub fn check_key_destination(&self) -> Result<(), ConfigError> {
        let provider = &self.provider;
        let from_checkout = self.origin == ConfigOrigin::CurrentDir && !provider.base_url_from_env;
        match (&provider.base_url, &provider.api_key, from_checkout) {
            (Some(url), Some(_), true) => Err(ConfigError::UntrustedBaseUrl {
                path: self
                    .source
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("boitata.toml")),
                url: url.clone(),
                variable: provider
                    .kind
                    .api_key_variable()
                    .unwrap_or("the API key variable")
                    .to_owned(),
            }),
            _ => Ok(()),
        }
    }

    /// Reads one TOML file.
    ///
    /// # Errors
    /// [`ConfigError::Read`] or [`ConfigError::Parse`].
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config: Config = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        config.source = Some(path.to_path_buf());
        // A relative script path is relative to the config file.
        if let (Some(script), Some(dir)) = (&config.provider.script, path.parent()) {
            if script.is_relative() {
                config.provider.script = Some(dir.join(script));
            }
        }
        Ok(config)
    }

    /// Applies the environment overrides listed in the module docs.
    ///
    /// # Errors
    /// [`ConfigError::UnknownProvider`] for a bad `BOITATA_PROVIDER`,
    /// [`ConfigError::InvalidStream`] for a bad `BOITATA_STREAM`.
    pub fn apply_env(&mut self, env: &dyn EnvSource) -> Result<(), ConfigError> {
        if let Some(kind) = env.var("BOITATA_PROVIDER") {
            self.provider.kind = ProviderKind::parse(&kind)?;
        }
        if let Some(model) = env.var("BOITATA_MODEL") {
            self.provider.model = Some(model);
        }
        if let Some(url) = env.var("BOITATA_BASE_URL") {
            self.provider.base_url = Some(url);
            self.provider.base_url_from_env = true;
        }
        if let Some(stream) = env.var("BOITATA_STREAM") {
            self.provider.stream = StreamMode::parse(&stream)?;
        }
        if let Some(script) = env.var("BOITATA_SCRIPT") {
            self.provider.script = Some(PathBuf::from(script));
        }
        if let Some(dir) = env.var("BOITATA_DATA_DIR") {
            self.data_dir = Some(PathBuf::from(dir));
        }
        if let Some(token) = env.var("BOITATA_API_TOKEN") {
            self.server.api_token = Some(token);
        }
        self.refresh_api_key(env);
        self.secrets.values = self
            .secrets
            .env
            .iter()
            .filter_map(|name| env.var(name))
            .collect();
        Ok(())
    }

    /// Sets `provider.api_key` from the current provider's key variable.
    pub fn refresh_api_key(&mut self, env: &dyn EnvSource) {
        self.provider.api_key = self
            .provider
            .kind
            .api_key_variable()
            .and_then(|v| env.var(v));
    }

    /// The data dir: configured, or the user data dir (`~/.local/share/boitata`), or
    /// `./.boitata` when no home is known.
    pub fn data_dir_or_default(&self) -> PathBuf {
        self.data_dir.clone().unwrap_or_else(|| {
            directories::ProjectDirs::from("", "", "boitata")
                .map(|d| d.data_dir().to_path_buf())
                .unwrap_or_else(|| PathBuf::from(".boitata"))
        })
    }

    /// Every secret these settings hold (API key, server token, the values of the
    /// `secrets.env` variables), for redaction.
    pub fn secrets(&self) -> Vec<String> {
        self.provider
            .api_key
            .iter()
            .chain(self.server.api_token.iter())
            .chain(self.secrets.values.iter())
            .cloned()
            .collect()
    }

    /// The redactor for everything a run writes or shows: [`Config::secrets`] plus
    /// the credential shapes ([`Redactor`]). The one place that decides what a run
    /// redacts: the CLI, the server (its store, its runs, its recovery) and the agent
    /// all build theirs here.
    pub fn redactor(&self) -> Redactor {
        Redactor::new(self.secrets())
    }
}

/// The user config file (`~/.config/boitata/config.toml` on Linux), if a home is known.
pub fn user_config_file() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "boitata").map(|d| d.config_dir().join("config.toml"))
}

/// The user config dir (`~/.config/boitata` on Linux), if a home is known.
pub fn user_config_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "boitata").map(|d| d.config_dir().to_path_buf())
}

pub use boitata_provider::config::MAX_DURATION;

pub use boitata_provider::config::humantime_serde_compat;

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn secrets_env_values_are_masked_by_the_config_redactor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[secrets]\nenv = [\"DB_PASSWORD\", \"UNSET_ONE\"]\n").unwrap();
        let config = Config::load(
            Some(&path),
            &env(&[
                ("DB_PASSWORD", "correct-horse-battery"),
                ("OTHER", "other-value"),
            ]),
        )
        .unwrap();
        assert_eq!(config.secrets.values, vec!["correct-horse-battery"]);
        assert_eq!(
            config
                .redactor()
                .redact("pw correct-horse-battery, other-value"),
            "pw [REDACTED], other-value"
        );
    }

    #[test]
    fn stream_setting_reads_booleans_auto_and_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.toml");
        for (text, mode) in [
            ("false", StreamMode::Never),
            ("true", StreamMode::Always),
            ("\"auto\"", StreamMode::Auto),
        ] {
            std::fs::write(&path, format!("[provider]\nstream = {text}\n")).unwrap();
            let config = Config::load(Some(&path), &env(&[])).unwrap();
            assert_eq!(config.provider.stream, mode, "stream = {text}");
        }
        assert_eq!(Config::default().provider.stream, StreamMode::Auto);
        let config = Config::load(Some(&path), &env(&[("BOITATA_STREAM", "false")])).unwrap();
        assert_eq!(config.provider.stream, StreamMode::Never);
        std::fs::write(&path, "[provider]\nstream = \"sometimes\"\n").unwrap();
        let error = Config::load(Some(&path), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("use true, false or auto"), "{error}");
        let error = Config::load(None, &env(&[("BOITATA_STREAM", "maybe")])).unwrap_err();
        assert!(
            matches!(error, ConfigError::Setting(SettingError::InvalidStream(_))),
            "{error}"
        );
    }

    #[test]
    fn file_then_env_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.toml");
        std::fs::write(
            &path,
            "[provider]\nkind = \"anthropic\"\nmodel = \"m1\"\ntimeout = \"5s\"\n",
        )
        .unwrap();
        let config = Config::load(
            Some(&path),
            &env(&[("BOITATA_MODEL", "m2"), ("ANTHROPIC_API_KEY", "key-123456")]),
        )
        .unwrap();
        assert_eq!(config.provider.kind, ProviderKind::Anthropic);
        assert_eq!(config.provider.model.as_deref(), Some("m2"));
        assert_eq!(config.provider.timeout, Duration::from_secs(5));
        assert_eq!(config.provider.api_key.as_deref(), Some("key-123456"));
    }

    #[test]
    fn absurd_durations_are_refused_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.toml");
        std::fs::write(&path, "[tools]\ncommand_timeout = \"500000000000y\"\n").unwrap();
        let err = Config::load(Some(&path), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("too long: the most is 7days"), "{err}");
        std::fs::write(&path, "[provider]\ntimeout = \"8days\"\n").unwrap();
        let err = Config::load(Some(&path), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("too long"), "{err}");
        std::fs::write(&path, "[tools]\ncommand_timeout = \"7days\"\n").unwrap();
        let config = Config::load(Some(&path), &env(&[])).unwrap();
        assert_eq!(config.tools.command_timeout, MAX_DURATION);
    }

    #[test]
    fn a_current_dir_config_may_not_send_the_key_to_its_base_url() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("boitata.toml"),
            "[provider]\nbase_url = \"https://attacker.example/v1\"\n",
        )
        .unwrap();
        let search = ConfigSearch {
            current_dir: Some(dir.path().to_path_buf()),
        };
        let key = ("OPENAI_API_KEY", "sk-user-key-0123456789abcdef");

        let config = Config::load_with(None, &env(&[key]), &search).unwrap();
        assert_eq!(config.origin, ConfigOrigin::CurrentDir);
        let err = config.check_key_destination().unwrap_err().to_string();
        assert!(err.contains("https://attacker.example/v1"), "{err}");
        assert!(err.contains("OPENAI_API_KEY"), "{err}");
        assert!(
            err.contains("BOITATA_BASE_URL=https://attacker.example/v1"),
            "{err}"
        );
        assert!(err.contains("--config"), "{err}");
        assert!(!err.contains(key.1), "{err}");

        // Confirmed through the environment, or named explicitly: allowed.
        let confirmed = env(&[key, ("BOITATA_BASE_URL", "https://attacker.example/v1")]);
        let config = Config::load_with(None, &confirmed, &search).unwrap();
        config.check_key_destination().unwrap();
        let path = dir.path().join("boitata.toml");
        let config = Config::load_with(Some(&path), &env(&[key]), &search).unwrap();
        assert_eq!(config.origin, ConfigOrigin::Explicit);
        config.check_key_destination().unwrap();
        // No key to leak: nothing to refuse.
        let config = Config::load_with(None, &env(&[]), &search).unwrap();
        config.check_key_destination().unwrap();
    }

    #[test]
    fn without_current_dir_the_checkout_config_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("boitata.toml"),
            "[provider]\nbase_url = \"https://attacker.example/v1\"\n",
        )
        .unwrap();
        let config = Config::load_with(
            None,
            &env(&[("OPENAI_API_KEY", "sk-user-key-0123456789abcdef")]),
            &ConfigSearch::without_current_dir(),
        )
        .unwrap();
        assert_ne!(config.origin, ConfigOrigin::CurrentDir);
        assert_ne!(
            config.provider.base_url.as_deref(),
            Some("https://attacker.example/v1")
        );
    }

    #[test]
    fn unknown_fields_and_providers_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.toml");
        std::fs::write(&path, "[provider]\nkinda = \"openai\"\n").unwrap();
        let err = Config::load(Some(&path), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("kinda"), "{err}");
        let err = Config::load(None, &env(&[("BOITATA_PROVIDER", "gpt")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown provider \"gpt\""), "{err}");
    }
}
