//! `search`: a regular expression over the workspace's files, respecting `.gitignore`.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::overrides::OverrideBuilder;
use ignore::WalkBuilder;
use serde::Deserialize;
use serde_json::json;

use super::output::{ensure_newline, CappedText};
use super::{blocking, BuiltinTool, ToolContext, ToolError};
use crate::workspace::Workspace;

/// A matching line longer than this is shown cut, with `…`.
const MAX_LINE_BYTES: usize = 300;
/// How many skipped files are named in the output.
const MAX_SKIPPED_SHOWN: usize = 5;

/// Searches file contents beneath the workspace root.
pub(super) struct Search;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Arguments {
    pattern: String,
    #[serde(default = "default_path")]
    path: String,
    glob: Option<String>,
}

fn default_path() -> String {
    ".".to_owned()
}

#[async_trait]
impl BuiltinTool for Search {
    const NAME: &'static str = "search";
    const DESCRIPTION: &'static str =
        "Search file contents in the workspace with a regular expression \
        (Rust regex syntax, as ripgrep; use (?i) for case-insensitive). Walks the tree \
        like ripgrep: files ignored by .gitignore, .ignore or .git/info/exclude are \
        skipped, as are the .git directory, binary files and symbolic links. Prints \
        one line per match as `path:line: text`, paths relative to the workspace root, \
        sorted by path; output beyond the tool output limit is cut with a note.";
    type Arguments = Arguments;

    fn parameters() -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "The regular expression to find, matched against each line."
                },
                "path": {
                    "type": "string",
                    "description": "A directory or file to search, relative to the workspace root. Default: \".\" (the whole workspace)."
                },
                "glob": {
                    "type": "string",
                    "description": "Only search files whose path matches this glob, gitignore-style (e.g. \"*.rs\", \"src/**/*.ts\"), relative to `path`."
                }
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    async fn run(&self, ctx: &ToolContext, args: Arguments) -> Result<String, ToolError> {
        let max_bytes = ctx.limits.max_output_bytes;
        let cancel = ctx.cancel.clone();
        blocking(ctx, move |workspace| {
            search(workspace, &args, max_bytes, &cancel)
        })
        .await
    }
}

fn search(
    workspace: &Workspace,
    args: &Arguments,
    max_bytes: usize,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<String, ToolError> {
    let matcher = RegexMatcherBuilder::new()
        .build(&args.pattern)
        .map_err(|e| Search::invalid(format!("pattern is not a valid regular expression: {e}")))?;

    // Walk from the canonical host path the search path resolves to beneath the root;
    // each file is then opened through the workspace again, so a link or a swap can
    // never make the search read outside.
    let start = workspace.real_path(&args.path)?;
    let glob = match &args.glob {
        Some(glob) => {
            let mut builder = OverrideBuilder::new(&start);
            builder
                .add(glob)
                .map_err(|e| Search::invalid(format!("glob {glob:?} is not valid: {e}")))?;
            Some(
                builder
                    .build()
                    .map_err(|e| Search::invalid(format!("glob {glob:?} is not valid: {e}")))?,
            )
        }
        None => None,
    };

    let mut walker = WalkBuilder::new(&start);
    walker
        .hidden(false)
        .parents(false)
        .git_global(false)
        .git_ignore(true)
        .git_exclude(true)
        .ignore(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_path(Path::cmp)
        .filter_entry(|entry| entry.file_name() != ".git");

    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let mut shown = CappedText::new(max_bytes);
    let mut matches = 0u64;
    let mut unshown_matches = 0u64;
    let mut unreadable: Vec<String> = Vec::new();

    for entry in walker.build() {
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if let Some(glob) = &glob {
            if !glob.matched(entry.path(), false).is_whitelist() {
                continue;
            }
        }
        let Some(relative) = relative_to(entry.path(), workspace.root()) else {
            continue;
        };
        // Opened through cap-std: a file swapped for a link since the walk saw it is
        // still refused if it leads outside.
        let file = match workspace.open_file(&relative) {
            Ok(file) => file,
            Err(e) => {
                unreadable.push(e.to_string());
                continue;
            }
        };
        let shown_path = relative.display().to_string();
        let searched = searcher.search_file(
            &matcher,
            &file,
            Lossy(|line_number, line| {
                matches += 1;
                let line = line.trim_end_matches(['\n', '\r']);
                let text = if line.len() > MAX_LINE_BYTES {
                    format!(
                        "{}…",
                        super::output::prefix_at_boundary(line, MAX_LINE_BYTES)
                    )
                } else {
                    line.to_owned()
                };
                if !shown.push(&format!("{shown_path}:{line_number}: {text}\n")) {
                    unshown_matches += 1;
                }
                Ok(true)
            }),
        );
        if let Err(e) = searched {
            unreadable.push(format!("cannot search {shown_path}: {e}"));
        }
    }

    let cut = shown.cut_bytes();
    let mut text = if shown.is_empty() {
        format!("no matches for {:?}", args.pattern)
    } else {
        shown.into_text()
    };
    if cut > 0 {
        ensure_newline(&mut text);
        text.push_str(&format!(
            "[... {cut} bytes cut at the output limit: {unshown_matches} of {matches} matching \
             lines not shown; narrow the pattern, path or glob ...]"
        ));
    }
    if !unreadable.is_empty() {
        ensure_newline(&mut text);
        let shown_reasons = unreadable.iter().take(MAX_SKIPPED_SHOWN).cloned();
        text.push_str(&format!(
            "[{} files skipped: {}{}]",
            unreadable.len(),
            shown_reasons.collect::<Vec<_>>().join("; "),
            if unreadable.len() > MAX_SKIPPED_SHOWN {
                "; …"
            } else {
                ""
            }
        ));
    }
    Ok(text)
}

/// `path` relative to `root`, component-wise; `None` if it is not beneath it.
fn relative_to(path: &Path, root: &Path) -> Option<PathBuf> {
    let relative = path.strip_prefix(root).ok()?;
    Some(if relative.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        relative.to_path_buf()
    })
}
