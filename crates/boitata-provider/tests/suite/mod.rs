mod provider_anthropic;
mod provider_build;
mod provider_limits;
mod provider_openai;
mod provider_scripted;
