//! `file_edit`: replace one exact string in a file of the workspace.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::{blocking, file_path_schema, BuiltinTool, ToolContext, ToolError};

/// Replaces the one occurrence of a string in a file beneath the workspace root.
pub(super) struct FileEdit;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Arguments {
    path: String,
    old_string: String,
    new_string: String,
}

#[async_trait]
impl BuiltinTool for FileEdit {
    const NAME: &'static str = "file_edit";
    const DESCRIPTION: &'static str =
        "Edit a UTF-8 text file in the workspace by replacing one exact \
        occurrence of `old_string` with `new_string`. The match is exact: every \
        character, space, indentation and line break counts. The edit fails, changing \
        nothing, if `old_string` does not occur or occurs more than once; then give \
        more surrounding lines so it matches exactly once. To create a file, use \
        file_write.";
    type Arguments = Arguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "path": file_path_schema(),
                "old_string": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The exact text to replace; it must occur exactly once in the file."
                },
                "new_string": {
                    "type": "string",
                    "description": "The text to put in its place (may be empty to delete)."
                }
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, args: Arguments) -> Result<String, ToolError> {
        if args.old_string.is_empty() {
            return Err(Self::invalid(
                "old_string is empty; give the exact text to replace",
            ));
        }
        if args.old_string == args.new_string {
            return Err(Self::invalid(
                "old_string and new_string are identical; nothing would change",
            ));
        }
        blocking(ctx, move |workspace| {
            let text = workspace.read_to_string(&args.path)?;
            let path = &args.path;
            match occurrences(&text, &args.old_string) {
                0 => Err(ToolError::Failed(format!(
                    "old_string not found in {path}; nothing changed (read the file and copy \
                     the text exactly, including whitespace)"
                ))),
                1 => {
                    let edited = text.replacen(args.old_string.as_str(), &args.new_string, 1);
                    workspace.write(path, &edited)?;
                    Ok(format!("edited {path}: replaced 1 occurrence"))
                }
                count => Err(ToolError::Failed(format!(
                    "old_string occurs {count} times in {path}; nothing changed (include more \
                     surrounding text so it matches exactly once)"
                ))),
            }
        })
        .await
    }
}

/// How many places `needle` starts at in `text`, overlapping ones included (`"aa"`
/// occurs twice in `"aaa"`: replacing "the" occurrence would be ambiguous).
fn occurrences(text: &str, needle: &str) -> usize {
    let mut count = 0;
    let mut from = 0;
    while let Some(found) = text.get(from..).and_then(|rest| rest.find(needle)) {
        count += 1;
        let at = from + found;
        let step = text
            .get(at..)
            .and_then(|rest| rest.chars().next())
            .map_or(1, char::len_utf8);
        from = at + step;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::occurrences;

    #[test]
    fn occurrences_counts_overlaps_and_multibyte_text() {
        assert_eq!(occurrences("aaa", "aa"), 2);
        assert_eq!(occurrences("héllo héllo", "é"), 2);
        assert_eq!(occurrences("abc", "x"), 0);
    }
}
