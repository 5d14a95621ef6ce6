//! A tool call in one line: the arguments that matter for each tool, for a person
//! following a run (the CLI's `→ search …` lines, ACP tool-call titles).

use serde_json::Value;

/// The longest summary, in characters (longer ones end in `…`).
pub const MAX_SUMMARY_CHARS: usize = 160;

/// The arguments of a call to `tool` that matter, on one line, without the tool's name:
///
/// | tool | summary |
/// |---|---|
/// | `execute_command` | the command (`, timeout 30s` when set) |
/// | `file_read` | the path (`, lines 10–29` for a range) |
/// | `file_write` | the path and the content's size (`, 120 bytes`) |
/// | `file_edit`, `list_dir` | the path |
/// | `search` | the pattern, quoted, `in` the path (`, glob *.rs`) |
/// | `git_diff` | `--staged` and the path, when given |
/// | `git_log` | `max N` when given |
/// | `git_commit` | the message's first line (`, all` with `all: true`) |
/// | any other (MCP tools) | `name=value` for each argument |
///
/// Line breaks become spaces; at most [`MAX_SUMMARY_CHARS`] characters. Control and
/// bidirectional characters are left for the display to neutralise.
pub fn call_summary(tool: &str, arguments: &Value) -> String {
    let text = |key: &str| arguments.get(key).and_then(Value::as_str);
    let number = |key: &str| arguments.get(key).and_then(Value::as_u64);
    let mut parts: Vec<String> = Vec::new();
    match tool {
        "execute_command" => {
            parts.extend(text("command").map(str::to_owned));
            parts.extend(number("timeout_secs").map(|secs| format!("timeout {secs}s")));
        }
        "file_read" => {
            parts.extend(text("path").map(str::to_owned));
            let first = number("offset").unwrap_or(1).max(1);
            match number("limit") {
                Some(limit) => parts.push(format!(
                    "lines {first}–{}",
                    first.saturating_add(limit.saturating_sub(1))
                )),
                None if first > 1 => parts.push(format!("from line {first}")),
                None => {}
            }
        }
        "file_write" => {
            parts.extend(text("path").map(str::to_owned));
            parts.extend(text("content").map(|c| format!("{} bytes", c.len())));
        }
        "file_edit" | "list_dir" => parts.extend(text("path").map(str::to_owned)),
        "search" => {
            let pattern = text("pattern").map(|p| format!("\"{p}\""));
            let path = text("path").filter(|p| !p.is_empty()).unwrap_or(".");
            parts.extend(pattern.map(|p| format!("{p} in {path}")));
            parts.extend(text("glob").map(|glob| format!("glob {glob}")));
        }
        "git_status" => {}
        "git_diff" => {
            if arguments.get("staged").and_then(Value::as_bool) == Some(true) {
                parts.push("--staged".to_owned());
            }
            parts.extend(text("path").map(str::to_owned));
        }
        "git_log" => parts.extend(number("max_count").map(|n| format!("max {n}"))),
        "git_commit" => {
            parts.extend(text("message").map(|m| m.lines().next().unwrap_or("").to_owned()));
            if arguments.get("all").and_then(Value::as_bool) == Some(true) {
                parts.push("all".to_owned());
            }
        }
        _ => match arguments {
            Value::Object(fields) => parts.extend(fields.iter().map(|(name, value)| match value {
                Value::String(s) => format!("{name}={s}"),
                other => format!("{name}={other}"),
            })),
            Value::Null => {}
            other => parts.push(other.to_string()),
        },
    }
    one_line(&parts.join(", "))
}

/// `text` with line breaks as spaces, cut to [`MAX_SUMMARY_CHARS`].
fn one_line(text: &str) -> String {
    let flat = text.replace("\r\n", " ").replace(['\n', '\r'], " ");
    if flat.chars().count() <= MAX_SUMMARY_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(MAX_SUMMARY_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_tool_shows_the_arguments_that_matter() {
        let cases = [
            (
                "search",
                json!({"pattern": "fn main", "path": "src", "glob": "*.rs"}),
                r#""fn main" in src, glob *.rs"#,
            ),
            ("search", json!({"pattern": "todo"}), r#""todo" in ."#),
            (
                "execute_command",
                json!({"command": "cargo test\n--all", "timeout_secs": 30}),
                "cargo test --all, timeout 30s",
            ),
            (
                "file_read",
                json!({"path": "a.rs", "offset": 10, "limit": 20}),
                "a.rs, lines 10–29",
            ),
            ("file_read", json!({"path": "a.rs"}), "a.rs"),
            (
                "file_write",
                json!({"path": "b.txt", "content": "hello"}),
                "b.txt, 5 bytes",
            ),
            (
                "file_edit",
                json!({"path": "c.rs", "old_string": "a", "new_string": "b"}),
                "c.rs",
            ),
            ("list_dir", json!({"path": "."}), "."),
            ("git_status", json!({}), ""),
            (
                "git_diff",
                json!({"staged": true, "path": "src"}),
                "--staged, src",
            ),
            ("git_log", json!({"max_count": 5}), "max 5"),
            (
                "git_commit",
                json!({"message": "Fix it\n\ndetails", "all": true}),
                "Fix it, all",
            ),
            (
                "mcp_fetch",
                json!({"url": "https://example.invalid"}),
                "url=https://example.invalid",
            ),
            ("mcp_count", json!({"max": 3}), "max=3"),
        ];
        for (tool, arguments, expected) in cases {
            assert_eq!(call_summary(tool, &arguments), expected, "{tool}");
        }
    }

    #[test]
    fn long_summaries_are_cut() {
        let long = "x".repeat(500);
        let summary = call_summary("execute_command", &json!({"command": long}));
        assert_eq!(summary.chars().count(), MAX_SUMMARY_CHARS);
        assert!(summary.ends_with('…'));
    }
}
