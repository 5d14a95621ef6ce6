//! git tools (placeholder).
use super::{Tool, ToolContext, ToolError, ToolSpec};
use async_trait::async_trait;
pub(super) struct GitStatus;
#[async_trait]
impl Tool for GitStatus {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "git_status".into(),
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
pub(super) struct GitDiff;
#[async_trait]
impl Tool for GitDiff {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "git_diff".into(),
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
pub(super) struct GitLog;
#[async_trait]
impl Tool for GitLog {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "git_log".into(),
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
pub(super) struct GitCommit;
#[async_trait]
impl Tool for GitCommit {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "git_commit".into(),
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
