//! `checkout`: put a git repository into a sandbox. Output: `PATH COMMIT` (the
//! checked-out directory inside the sandbox and the full commit id of its `HEAD`).
//!
//! - A **host path** (absolute, or relative to the run's workspace) or a `file://` URL:
//!   the repository's committed history (`HEAD`, branches and tags) is packed on the
//!   host with `git bundle create` (which only reads the repository), uploaded into
//!   the sandbox as a tar archive, and cloned there. Nothing is mounted, and the host
//!   repository is never written to. Uncommitted changes are not part of a clone.
//! - A **git URL** (`https://…`, `ssh://…`, `git@host:path`): cloned *on the host*
//!   (a bare clone in a temporary directory, with the host's git settings and
//!   credentials, `ext::` transports refused, no prompt), then bundled and uploaded
//!   like a host path. The sandbox needs no egress for it.
//!
//! Without `ref` the sandbox gets what the host has checked out (the branch, or the
//! detached commit) or, for a URL, the remote's default branch; with `ref` that
//! branch, tag or commit. `dest` defaults to the sandbox's working directory
//! (`/workspace`) and must be empty or absent.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use async_trait::async_trait;
use boitata_blueprint::{Node, NodeContext, NodeError, NodeHandler, NodeOutcome, NodeSpec};
use tokio::process::Command;

use super::output::EventOutput;
use super::SandboxNodes;
use crate::archive;
use crate::sandbox::{ExecSpec, ExecStatus, SandboxId, DEFAULT_WORKDIR};

/// Clones `$1` (an uploaded bundle file) into `$2`, checks out `$3` if set, removes the
/// directory `$4` if set (the uploaded bundle), and prints the commit.
const CLONE_SCRIPT: &str = r#"set -e
src=$1 dest=$2 ref=$3 upload=$4
if [ -d "$dest" ] && [ -n "$(ls -A -- "$dest")" ]; then
  echo "checkout: $dest is not empty; choose another dest" >&2
  exit 1
fi
git clone --quiet -- "$src" "$dest"
if [ -n "$upload" ]; then rm -rf -- "$upload"; fi
cd -- "$dest"
if [ -n "$ref" ]; then git checkout --quiet "$ref"; fi
git rev-parse HEAD
"#;

/// The `checkout` handler.
#[derive(Debug, Clone)]
pub struct Checkout {
    nodes: SandboxNodes,
}

impl Checkout {
    /// A handler checking out into the sandboxes of `nodes`.
    pub fn new(nodes: SandboxNodes) -> Self {
        Checkout { nodes }
    }
}

/// Where the code comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// A repository on the host.
    HostPath(PathBuf),
    /// A URL, cloned on the host.
    Remote(String),
}

#[async_trait]
impl NodeHandler for Checkout {
    async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
        let NodeSpec::Checkout(fields) = &node.spec else {
            return Err(NodeError::Invalid(format!(
                "node {:?}: the checkout handler cannot run a {} node",
                node.id,
                node.node_type()
            )));
        };
        let invalid =
            |message: String| NodeError::Invalid(format!("node {:?}: {message}", node.id));
        let id = self.nodes.sandbox_of_run(ctx, &fields.container)?;
        let dest = fields
            .dest
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .unwrap_or(DEFAULT_WORKDIR)
            .to_owned();
        if !dest.starts_with('/') {
            return Err(invalid(format!(
                "dest {dest:?} is not an absolute path inside the sandbox, e.g. /workspace"
            )));
        }
        let mut git_ref = fields
            .git_ref
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        if let Some(r) = &git_ref {
            if r.starts_with('-') || r.contains(char::is_whitespace) {
                return Err(invalid(format!("ref {r:?} is not a branch, tag or commit")));
            }
        }

        let repo = fields.repo.trim();
        // A URL is cloned on the host first; the clone then goes in as a host path.
        let mut fetched = None;
        let path = match source(repo, ctx.workspace()) {
            Source::Remote(url) => {
                let dir = tempfile::Builder::new()
                    .prefix("boitata-checkout-")
                    .tempdir()
                    .map_err(|e| NodeError::Io {
                        action: format!(
                            "node {:?}: cannot make a directory to clone {url} in",
                            node.id
                        ),
                        source: e,
                    })?;
                let clone = tokio::select! {
                    () = ctx.cancel().cancelled() => return Err(NodeError::Cancelled),
                    cloned = clone_on_host(&url, dir.path()) => cloned.map_err(invalid)?,
                };
                fetched = Some(dir);
                clone
            }
            Source::HostPath(path) => path,
        };
        let packed = tokio::select! {
            () = ctx.cancel().cancelled() => return Err(NodeError::Cancelled),
            packed = pack_host_repo(&path) => packed.map_err(invalid)?,
        };
        // The host clone (if any) is no longer needed.
        drop(fetched);
        if git_ref.is_none() {
            git_ref = Some(packed.head);
        }
        let upload_dir = format!("/tmp/boitata-checkout-{}", uuid::Uuid::now_v7().simple());
        let tar = archive::single_file("repo.bundle", &packed.bundle, 0o644).map_err(|e| {
            NodeError::Io {
                action: format!("node {:?}: cannot archive the bundle of {repo}", node.id),
                source: e,
            }
        })?;
        self.upload(&id, tar, &upload_dir, ctx).await?;
        let src = format!("{upload_dir}/repo.bundle");

        let spec = ExecSpec::new([
            "sh".to_owned(),
            "-c".to_owned(),
            CLONE_SCRIPT.to_owned(),
            "boitata-checkout".to_owned(),
            src,
            dest.clone(),
            git_ref.unwrap_or_default(),
            upload_dir,
        ])
        .cancel_on(ctx.cancel().clone());
        let mut output = EventOutput::new(ctx.emitter().clone(), ctx.node_id());
        let status = self.nodes.backend().exec(&id, &spec, &mut output).await;
        let (stdout, stderr) = output.finish();
        match status.map_err(NodeError::other)? {
            ExecStatus::Exited(0) => {
                let commit = stdout.lines().last().unwrap_or_default().trim().to_owned();
                Ok(NodeOutcome::success(format!("{dest} {commit}")))
            }
            ExecStatus::Exited(code) => {
                let mut failed = NodeOutcome::from_exit_code(code, stderr.trim().to_owned());
                if failed.output.is_empty() {
                    failed.output = format!("git clone of {repo} failed with exit code {code}");
                }
                Ok(failed)
            }
            ExecStatus::Cancelled | ExecStatus::TimedOut(_) => Ok(NodeOutcome::failure(stderr)),
            ExecStatus::Detached => Err(invalid("the clone was started detached".into())),
        }
    }
}

impl Checkout {
    async fn upload(
        &self,
        id: &SandboxId,
        tar: Vec<u8>,
        dir: &str,
        ctx: &NodeContext,
    ) -> Result<(), NodeError> {
        tokio::select! {
            () = ctx.cancel().cancelled() => Err(NodeError::Cancelled),
            uploaded = self.nodes.backend().upload(id, tar, dir) => uploaded.map_err(NodeError::other),
        }
    }
}

/// Tells a URL from a host path. `file://` URLs are host paths; relative paths are
/// taken from `workspace`.
fn source(repo: &str, workspace: &Path) -> Source {
    if let Some(rest) = repo.strip_prefix("file://") {
        // file:///abs/path, or file://localhost/abs/path.
        let path = rest.strip_prefix("localhost").unwrap_or(rest);
        return Source::HostPath(PathBuf::from(percent_decode(path)));
    }
    if repo.contains("://") || is_scp_like(repo) {
        return Source::Remote(repo.to_owned());
    }
    let path = Path::new(repo);
    if path.is_absolute() {
        Source::HostPath(path.to_owned())
    } else {
        Source::HostPath(workspace.join(path))
    }
}

/// `user@host:path` (git's scp-like syntax): a colon before any slash.
fn is_scp_like(repo: &str) -> bool {
    match (repo.find(':'), repo.find('/')) {
        (Some(colon), slash) => colon > 0 && slash.is_none_or(|s| colon < s) && repo.contains('@'),
        (None, _) => false,
    }
}

/// Decodes `%XX` escapes (as in `file:///my%20repo`); anything malformed is kept.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(value) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(value);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Clones `url` bare into `dir/repo.git` on the host, never prompting, refusing the
/// `ext::` transport (which runs commands); the clone's path.
async fn clone_on_host(url: &str, dir: &Path) -> Result<PathBuf, String> {
    let args = [
        "-c",
        "protocol.ext.allow=never",
        "clone",
        "--bare",
        "--quiet",
        "--",
        url,
        "repo.git",
    ];
    git_bytes(dir, &args).await.map_err(|e| {
        format!("repo {url}: git clone on the host failed ({e}): check the URL and the host's access to it")
    })?;
    Ok(dir.join("repo.git"))
}

/// A host repository packed for the sandbox.
struct Packed {
    /// `git bundle` of `HEAD`, branches and tags.
    bundle: Vec<u8>,
    /// What to check out to match the host: its branch, or its commit when detached.
    head: String,
}

/// Bundles the repository at `path`, only reading it.
async fn pack_host_repo(path: &Path) -> Result<Packed, String> {
    if !path.exists() {
        return Err(format!(
            "repo {}: no such directory; give a git repository's path or URL",
            path.display()
        ));
    }
    check_top_level(path).await?;
    let commit = git(path, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .await
        .map_err(|e| {
            format!(
                "repo {}: not a git repository with a commit ({e}); commit something or give another path",
                path.display()
            )
        })?;
    let branch = git(path, &["symbolic-ref", "--quiet", "--short", "HEAD"])
        .await
        .unwrap_or_default();
    let bundle = git_bytes(
        path,
        &["bundle", "create", "-", "HEAD", "--branches", "--tags"],
    )
    .await
    .map_err(|e| format!("repo {}: git bundle failed: {e}", path.display()))?;
    let head = if branch.trim().is_empty() {
        commit.trim().to_owned()
    } else {
        branch.trim().to_owned()
    };
    Ok(Packed { bundle, head })
}

/// Whether `path` is a repository itself (its work tree's top level, or a bare
/// repository), not a plain directory inside one: git would otherwise bundle the
/// enclosing repository (a dotfiles repository in `$HOME` would send the whole home).
async fn check_top_level(path: &Path) -> Result<(), String> {
    let not_a_repository = |why: String| {
        format!(
            "not a git repository: {} ({why}); give a repository's top-level directory or URL",
            path.display()
        )
    };
    let bare = git(path, &["rev-parse", "--is-bare-repository"])
        .await
        .map_err(|e| not_a_repository(e.trim().to_owned()))?;
    let top = if bare.trim() == "true" {
        git(path, &["rev-parse", "--absolute-git-dir"]).await
    } else {
        git(path, &["rev-parse", "--show-toplevel"]).await
    }
    .map_err(|e| not_a_repository(e.trim().to_owned()))?;
    let top = PathBuf::from(top.trim_end_matches(['\n', '\r']));
    let same = match (std::fs::canonicalize(path), std::fs::canonicalize(&top)) {
        (Ok(path), Ok(top)) => path == top,
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(not_a_repository(format!(
            "it is a directory inside the repository {}, which is not checked out for it",
            top.display()
        )))
    }
}

async fn git(path: &Path, args: &[&str]) -> Result<String, String> {
    git_bytes(path, args)
        .await
        .map(|out| String::from_utf8_lossy(&out).into_owned())
}

/// Runs `git -C path ARGS` on the host with a closed stdin and no prompt; its stdout,
/// or its stderr as the error.
async fn git_bytes(path: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(path)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        Err(if stderr.is_empty() {
            format!("git {} exited with {}", args.join(" "), output.status)
        } else {
            stderr
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_repository_top_level_is_packed() {
        let repo = boitata_test_support::repo::TempRepo::with_files(&[("sub/file.txt", "x\n")]);
        let sub = repo.path().join("sub");
        let error = match pack_host_repo(&sub).await {
            Ok(_) => panic!("a directory inside a repository was packed"),
            Err(e) => e,
        };
        assert!(
            error.starts_with(&format!("not a git repository: {}", sub.display())),
            "{error}"
        );
        let plain = tempfile::tempdir().unwrap();
        let error = match pack_host_repo(plain.path()).await {
            Ok(_) => panic!("a plain directory was packed"),
            Err(e) => e,
        };
        assert!(
            error.starts_with(&format!("not a git repository: {}", plain.path().display())),
            "{error}"
        );
        let packed = pack_host_repo(repo.path()).await.unwrap();
        assert!(!packed.bundle.is_empty());
    }

    #[test]
    fn sources_are_told_apart() {
        let ws = Path::new("/ws");
        assert_eq!(
            source("/srv/repo", ws),
            Source::HostPath("/srv/repo".into())
        );
        assert_eq!(
            source("sub/repo", ws),
            Source::HostPath("/ws/sub/repo".into())
        );
        assert_eq!(
            source("file:///srv/my%20repo", ws),
            Source::HostPath("/srv/my repo".into())
        );
        assert_eq!(
            source("file://localhost/srv/r", ws),
            Source::HostPath("/srv/r".into())
        );
        assert_eq!(
            source("https://example.invalid/r.git", ws),
            Source::Remote("https://example.invalid/r.git".into())
        );
        assert_eq!(
            source("git@example.invalid:org/r.git", ws),
            Source::Remote("git@example.invalid:org/r.git".into())
        );
        assert_eq!(source("./a:b", ws), Source::HostPath("/ws/./a:b".into()));
    }

    #[test]
    fn percent_escapes_decode_and_malformed_ones_stay() {
        assert_eq!(percent_decode("/a%20b"), "/a b");
        assert_eq!(percent_decode("/a%2"), "/a%2");
        assert_eq!(percent_decode("/a%zzb"), "/a%zzb");
    }
}
