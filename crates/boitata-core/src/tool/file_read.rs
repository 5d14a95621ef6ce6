//! `file_read` (placeholder: filled in by the tools work).
use super::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;

pub(super) struct FileRead;

#[async_trait]
impl Tool for FileRead {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "file_read".into(),
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
