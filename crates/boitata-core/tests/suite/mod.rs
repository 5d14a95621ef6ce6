mod agent_redaction;
mod provider_stream_setting;
