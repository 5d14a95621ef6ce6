//! `file_read`: a text file, or a range of its lines, from the workspace.

use std::io::{BufRead, BufReader};

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::output::{ensure_newline, CappedText};
use super::{blocking, file_path_schema, BuiltinTool, ToolContext, ToolError};

/// A file with a NUL byte in its first this-many bytes is taken as binary.
const BINARY_PROBE_BYTES: usize = 8 * 1024;

/// Reads a file beneath the workspace root.
pub(super) struct FileRead;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Arguments {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

#[async_trait]
impl BuiltinTool for FileRead {
    const NAME: &'static str = "file_read";
    const DESCRIPTION: &'static str =
        "Read a UTF-8 text file from the workspace. Returns the file's text \
        exactly as stored (no line numbers added). For a long file, pass `offset` and \
        `limit` to read a range of lines; output beyond the tool output limit is cut \
        and a final note says which `offset` to continue from. Binary files are \
        refused. Paths are relative to the workspace root and may not leave it.";
    type Arguments = Arguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": file_path_schema(),
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "The first line to return, counting from 1. Default: 1."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "The most lines to return. Default: through the end of the file."
                }
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, args: Arguments) -> Result<String, ToolError> {
        let first = args.offset.unwrap_or(1);
        if first == 0 || args.limit == Some(0) {
            return Err(Self::invalid(
                "offset and limit count lines from 1; 0 is not allowed",
            ));
        }
        let max_bytes = ctx.limits.max_output_bytes;
        blocking(ctx, move |workspace| {
            read_lines(workspace, &args.path, first, args.limit, max_bytes)
        })
        .await
    }
}

fn read_lines(
    workspace: &crate::workspace::Workspace,
    path: &str,
    first: u64,
    limit: Option<u64>,
    max_bytes: usize,
) -> Result<String, ToolError> {
    let io_failed = |e: std::io::Error| ToolError::Failed(format!("cannot read {path}: {e}"));
    let file = workspace.open_file(path)?;
    let mut reader = BufReader::new(file);

    let probe = reader.fill_buf().map_err(io_failed)?;
    if probe.iter().take(BINARY_PROBE_BYTES).any(|b| *b == 0) {
        return Err(ToolError::Failed(format!(
            "{path}: binary file; file_read shows text only"
        )));
    }

    let end = limit.map(|limit| first.saturating_add(limit));
    let mut shown = CappedText::new(max_bytes);
    let mut resume_at: Option<u64> = None;
    let mut line_count = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(io_failed)?;
        if read == 0 {
            break;
        }
        line_count += 1;
        let in_range = line_count >= first && end.is_none_or(|end| line_count < end);
        if in_range && !shown.push(&String::from_utf8_lossy(&line)) && resume_at.is_none() {
            resume_at = Some(line_count);
        }
    }

    if line_count == 0 {
        return Ok(format!("({path} is empty)"));
    }
    if first > line_count {
        return Err(ToolError::Failed(format!(
            "{path} has {line_count} lines; offset {first} is past the end"
        )));
    }
    let cut = shown.cut_bytes();
    let mut text = shown.into_text();
    if let Some(resume_at) = resume_at {
        ensure_newline(&mut text);
        text.push_str(&format!(
            "[... {cut} bytes cut at the output limit; continue with offset={resume_at} ...]"
        ));
    } else if let Some(end) = end.filter(|end| *end <= line_count) {
        ensure_newline(&mut text);
        text.push_str(&format!(
            "[... {} more lines; continue with offset={end} ...]",
            line_count - end + 1
        ));
    }
    Ok(text)
}
