mod agent_redaction;
mod provider_anthropic;
mod provider_build;
mod provider_limits;
mod provider_openai;
mod provider_scripted;
mod provider_stream_setting;
