//! `execute_command` (placeholder: filled in by the tools work).
use super::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;

pub(super) struct ExecuteCommand;

#[async_trait]
impl Tool for ExecuteCommand {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "execute_command".into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    async fn call(
        &self,
        _ctx: &ToolContext,
        _arguments: serde_json::Value,
    ) -> Result<String, ToolError> {
        Err(ToolError::Failed("not yet".into()))
    }
}
