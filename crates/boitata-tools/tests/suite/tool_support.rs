//! Fixtures shared by the tool and workspace tests: a workspace root beside a directory
//! outside it, a tool context on that root, and a look at live processes.

// Set-up helpers: a failed set-up is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use boitata_tools::tool::{ToolContext, ToolError, ToolLimits, Toolbox};
use boitata_tools::workspace::Workspace;
use tempfile::TempDir;

/// What the file outside the workspace holds: no test may ever see it in tool output.
pub(crate) const SECRET: &str = "TOP-SECRET-OUTSIDE-CONTENT";

/// `TMP/ws` (the workspace root) next to `TMP/outside` (holding `secret.txt`).
pub(crate) struct Fixture {
    _tmp: TempDir,
    pub(crate) root: PathBuf,
    pub(crate) outside: PathBuf,
    pub(crate) ctx: ToolContext,
    pub(crate) toolbox: Toolbox,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let root = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        let workspace = Workspace::open(&root).unwrap();
        let mut command_env = BTreeMap::new();
        command_env.insert("PATH".to_owned(), std::env::var("PATH").unwrap_or_default());
        let ctx = ToolContext {
            workspace,
            cancel: tokio_util::sync::CancellationToken::new(),
            command_env,
            limits: ToolLimits {
                command_timeout: Duration::from_secs(60),
                max_output_bytes: 32 * 1024,
            },
        };
        Fixture {
            _tmp: tmp,
            root,
            outside,
            ctx,
            toolbox: Toolbox::standard(),
        }
    }

    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Value,
    ) -> Result<String, ToolError> {
        self.toolbox.call(&self.ctx, tool, arguments).await
    }

    /// `outside` written without its leading `/`, so that it can follow a link to `/`.
    pub(crate) fn outside_from_slash(&self) -> String {
        self.outside
            .strip_prefix("/")
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// The names in the outside directory: only `secret.txt` unless something escaped.
    pub(crate) fn outside_names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    pub(crate) fn assert_outside_untouched(&self) {
        assert_eq!(self.outside_names(), vec!["secret.txt".to_owned()]);
        assert_eq!(
            std::fs::read_to_string(self.outside.join("secret.txt")).unwrap(),
            SECRET
        );
    }
}

/// Asserts that `result` is a refusal naming `path` as outside the workspace, and that
/// the secret did not leak into it.
pub(crate) fn assert_refused(result: Result<String, ToolError>, path: &str) {
    match result {
        Ok(output) => panic!("{path}: expected a refusal, got output {output:?}"),
        Err(err) => {
            let message = err.to_string();
            assert!(
                message.contains(path) && message.contains("outside the workspace"),
                "{path}: refusal should name the path and say it is outside: {message}"
            );
            assert!(!message.contains(SECRET), "secret leaked: {message}");
        }
    }
}

/// Live (not zombie) processes whose process group is `pgid`, as `(pid, command)`.
pub(crate) fn live_group_members(pgid: i32) -> Vec<(i32, String)> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let command = stat[stat.find('(').unwrap() + 1..close].to_owned();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let (state, group) = (fields[0], fields[2].parse::<i32>().unwrap());
        if group == pgid && state != "Z" {
            members.push((pid, command));
        }
    }
    members
}

/// Reads `name=NUMBER` from command output.
pub(crate) fn number_after(output: &str, name: &str) -> i32 {
    let start = output
        .find(name)
        .unwrap_or_else(|| panic!("no {name} in {output:?}"))
        + name.len();
    output[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// `path` inside the fixture's workspace as a host path.
pub(crate) fn inside(fixture: &Fixture, path: impl AsRef<Path>) -> PathBuf {
    fixture.root.join(path)
}
