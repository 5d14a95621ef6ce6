//! The one wiring of a provider and tools from [`Config`], shared by the CLI, the
//! server and the in-sandbox agent, so all three behave the same.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::agent::{Agent, AgentSettings, DEFAULT_SYSTEM_PROMPT};
use crate::budget::BudgetMeter;
use crate::config::{Config, EnvSource};
use crate::redact::Redactor;
use boitata_provider::{Provider, ProviderError};
use boitata_tools::tool::{ToolLimits, Toolbox};

/// Environment variables passed through to the agent's commands; everything else
/// (API keys, tokens, the agent's own settings) is withheld.
///
/// The proxy variables are among them: in a sandbox provisioned with `egress: allow`
/// they point at the run's egress proxy, the only way out, so `pip install` run by the
/// agent works as it does in an `exec` node. (A password in a proxy URL is masked in
/// what the model and the events see, like any URL's.)
pub const COMMAND_ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TERM",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONDONTWRITEBYTECODE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

/// A built provider plus everything needed to make agents.
#[derive(Clone)]
pub struct Runtime {
    config: Config,
    provider: Arc<dyn Provider>,
    command_env: BTreeMap<String, String>,
    redactor: Redactor,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("provider", &self.provider.name())
            .field("model", &self.provider.model())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Builds the configured provider. `env` supplies the commands' environment
    /// (filtered through [`COMMAND_ENV_ALLOWLIST`]).
    ///
    /// # Errors
    /// [`ProviderError`] when the provider cannot be built: a missing API key (the
    /// message names the variable to set), an unreadable script.
    pub fn from_config(config: Config, env: &dyn EnvSource) -> Result<Self, ProviderError> {
        let provider = boitata_provider::build(&config.provider)?;
        Ok(Self::with_provider(config, provider, env))
    }

    /// Like [`Runtime::from_config`] with a provider built elsewhere (tests).
    pub fn with_provider(config: Config, provider: Arc<dyn Provider>, env: &dyn EnvSource) -> Self {
        let command_env = COMMAND_ENV_ALLOWLIST
            .iter()
            .filter_map(|name| env.var(name).map(|v| ((*name).to_owned(), v)))
            .collect();
        let redactor = config.redactor();
        Runtime {
            config,
            provider,
            command_env,
            redactor,
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// A redactor for every secret in the settings ([`Config::redactor`]).
    pub fn redactor(&self) -> Redactor {
        self.redactor.clone()
    }

    /// The environment the agent's commands get.
    pub fn command_env(&self) -> &BTreeMap<String, String> {
        &self.command_env
    }

    /// An agent with every standard tool and the configured limits, charging a fresh
    /// meter of the config's `[budget]` (a blueprint node replaces it with its run's,
    /// [`Agent::with_budget`]).
    pub fn agent(&self) -> Agent {
        let settings = AgentSettings {
            max_turns: self.config.agent.max_turns,
            system_prompt: self
                .config
                .agent
                .system_prompt
                .clone()
                .unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_owned()),
            limits: ToolLimits {
                command_timeout: self.config.tools.command_timeout,
                max_output_bytes: self.config.tools.max_output_bytes,
            },
        };
        Agent::new(
            self.provider.clone(),
            Toolbox::standard(),
            settings,
            self.command_env.clone(),
        )
        .with_budget(BudgetMeter::new(self.config.budget))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_get_the_proxy_variables_but_no_key() {
        let env: BTreeMap<String, String> = [
            ("HTTP_PROXY", "http://172.18.0.1:41234"),
            ("https_proxy", "http://172.18.0.1:41234"),
            ("NO_PROXY", "localhost,127.0.0.1,172.18.0.1"),
            ("OPENAI_API_KEY", "bgw-0123456789abcdef"),
            ("BOITATA_AGENT_SECRET", "00112233445566778899"),
            ("PATH", "/usr/bin:/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let script = boitata_provider::scripted::Script {
            description: None,
            turns: Vec::new(),
        };
        let provider = Arc::new(boitata_provider::scripted::Scripted::new(script));
        let runtime = Runtime::with_provider(Config::default(), provider, &env);
        let names: Vec<&str> = runtime.command_env().keys().map(String::as_str).collect();
        assert_eq!(names, ["HTTP_PROXY", "NO_PROXY", "PATH", "https_proxy"]);
    }
}
