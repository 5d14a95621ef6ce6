//! `file_write`: create or replace a file in the workspace.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::{blocking, file_path_schema, BuiltinTool, ToolContext, ToolError};

/// Writes a whole file beneath the workspace root, creating parent directories.
pub(super) struct FileWrite;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Arguments {
    path: String,
    content: String,
}

#[async_trait]
impl BuiltinTool for FileWrite {
    const NAME: &'static str = "file_write";
    const DESCRIPTION: &'static str =
        "Create a file, or replace an existing file's whole content, in the \
        workspace. Missing parent directories are created. To change part of an \
        existing file, prefer file_edit. Paths are relative to the workspace root and \
        may not leave it (symbolic links leading out are refused).";
    type Arguments = Arguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": file_path_schema(),
                "content": {
                    "type": "string",
                    "description": "The complete new content of the file."
                }
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, args: Arguments) -> Result<String, ToolError> {
        blocking(ctx, move |workspace| {
            let existed = workspace.metadata(&args.path).is_ok();
            workspace.write(&args.path, &args.content)?;
            let verb = if existed { "replaced" } else { "created" };
            Ok(format!(
                "{verb} {} ({} bytes)",
                args.path,
                args.content.len()
            ))
        })
        .await
    }
}
