//! `list_dir`: the entries of a directory in the workspace.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::output::{ensure_newline, CappedText};
use super::{blocking, BuiltinTool, ToolContext, ToolError};
use crate::workspace::EntryKind;

/// Lists one directory beneath the workspace root.
pub(super) struct ListDir;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Arguments {
    #[serde(default = "default_path")]
    path: String,
}

fn default_path() -> String {
    ".".to_owned()
}

#[async_trait]
impl BuiltinTool for ListDir {
    const NAME: &'static str = "list_dir";
    const DESCRIPTION: &'static str =
        "List the entries of one directory of the workspace (not recursive), \
        sorted by name, one per line. Directories end with `/`; symbolic links are \
        shown as `name -> target` (a link whose target leaves the workspace cannot be \
        followed by the file tools). Hidden entries are included.";
    type Arguments = Arguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "The directory, relative to the workspace root. Default: \".\" (the root)."
                }
            },
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, args: Arguments) -> Result<String, ToolError> {
        let max_bytes = ctx.limits.max_output_bytes;
        blocking(ctx, move |workspace| {
            let entries = workspace.list_dir(&args.path)?;
            if entries.is_empty() {
                return Ok(format!("({} is empty)", args.path));
            }
            let mut shown = CappedText::new(max_bytes);
            let mut hidden_entries = 0usize;
            for entry in &entries {
                let line = match (&entry.kind, &entry.link_target) {
                    (EntryKind::Dir, _) => format!("{}/\n", entry.name),
                    (EntryKind::Symlink, Some(target)) => {
                        format!("{} -> {}\n", entry.name, target.display())
                    }
                    _ => format!("{}\n", entry.name),
                };
                if !shown.push(&line) {
                    hidden_entries += 1;
                }
            }
            let cut = shown.cut_bytes();
            let mut text = shown.into_text();
            if cut > 0 {
                ensure_newline(&mut text);
                text.push_str(&format!(
                    "[... {cut} bytes cut at the output limit: {hidden_entries} of {} entries not \
                     shown ...]",
                    entries.len()
                ));
            }
            Ok(text)
        })
        .await
    }
}
