//! The git tools on real repositories in temp dirs.

// Set-up helpers: a failed set-up is a failed test.
#![allow(clippy::unwrap_used)]

use serde_json::json;
use tempfile::TempDir;

use super::tool_support::{inside, Fixture};

/// A fixture whose commands see an empty HOME and no system config: git has no
/// identity unless a test gives the repository one.
fn git_fixture() -> (Fixture, TempDir) {
    let mut fx = Fixture::new();
    let home = tempfile::tempdir().unwrap();
    fx.ctx
        .command_env
        .insert("HOME".into(), home.path().display().to_string());
    fx.ctx
        .command_env
        .insert("GIT_CONFIG_NOSYSTEM".into(), "1".into());
    (fx, home)
}

async fn sh(fx: &Fixture, command: &str) -> String {
    fx.call("execute_command", json!({"command": command}))
        .await
        .unwrap_or_else(|e| panic!("{command}: {e}"))
}

#[tokio::test]
async fn git_commit_in_a_fresh_repo_without_identity_shows_in_git_log() {
    let (fx, _home) = git_fixture();
    sh(&fx, "git init -q").await;
    let identity = sh(&fx, "git config user.name; git config user.email; true").await;
    assert_eq!(
        identity, "[exit code: 0]",
        "the repo must start with no identity"
    );

    fx.call(
        "file_write",
        json!({"path": "hello.txt", "content": "hi\n"}),
    )
    .await
    .unwrap();
    let committed = fx
        .call(
            "git_commit",
            json!({"message": "Add hello.txt", "all": true}),
        )
        .await
        .unwrap();
    assert!(committed.contains("Add hello.txt"), "{committed}");

    let log = fx.call("git_log", json!({"max_count": 5})).await.unwrap();
    assert!(log.contains("Add hello.txt"), "{log}");
    assert!(log.contains("Author: boitata <boitata@localhost>"), "{log}");
    let tracked = sh(&fx, "git ls-files").await;
    assert!(tracked.starts_with("hello.txt\n"), "{tracked}");
}

#[tokio::test]
async fn git_commit_uses_the_configured_identity_when_there_is_one() {
    let (fx, _home) = git_fixture();
    sh(
        &fx,
        "git init -q && git config user.name Ada && git config user.email ada@example.com",
    )
    .await;
    fx.call("file_write", json!({"path": "a.txt", "content": "a\n"}))
        .await
        .unwrap();
    fx.call("git_commit", json!({"message": "First", "all": true}))
        .await
        .unwrap();
    let log = fx.call("git_log", json!({})).await.unwrap();
    assert!(log.contains("Author: Ada <ada@example.com>"), "{log}");
}

#[tokio::test]
async fn git_commit_without_all_commits_only_what_is_staged() {
    let (fx, _home) = git_fixture();
    sh(&fx, "git init -q").await;
    fx.call(
        "file_write",
        json!({"path": "staged.txt", "content": "s\n"}),
    )
    .await
    .unwrap();
    fx.call("file_write", json!({"path": "loose.txt", "content": "l\n"}))
        .await
        .unwrap();
    sh(&fx, "git add staged.txt").await;
    fx.call("git_commit", json!({"message": "Only staged"}))
        .await
        .unwrap();
    let status = fx.call("git_status", json!({})).await.unwrap();
    assert!(status.contains("?? loose.txt"), "{status}");
    assert!(!status.contains("staged.txt"), "{status}");

    let nothing = fx
        .call("git_commit", json!({"message": "Again"}))
        .await
        .unwrap_err();
    assert!(
        nothing
            .to_string()
            .contains("git commit --message=Again failed (exit code 1)")
            && nothing.to_string().contains("nothing added to commit"),
        "{nothing}"
    );
}

#[tokio::test]
async fn git_status_and_git_diff_show_changes() {
    let (fx, _home) = git_fixture();
    sh(&fx, "git init -q").await;
    fx.call("file_write", json!({"path": "f.txt", "content": "old\n"}))
        .await
        .unwrap();
    fx.call("git_commit", json!({"message": "Base", "all": true}))
        .await
        .unwrap();
    let clean = fx.call("git_status", json!({})).await.unwrap();
    assert!(clean.contains("(working tree clean)"), "{clean}");

    fx.call(
        "file_edit",
        json!({"path": "f.txt", "old_string": "old", "new_string": "new"}),
    )
    .await
    .unwrap();
    let status = fx.call("git_status", json!({})).await.unwrap();
    assert!(status.contains(" M f.txt"), "{status}");
    let diff = fx.call("git_diff", json!({})).await.unwrap();
    assert!(diff.contains("-old\n+new"), "{diff}");
    let staged = fx.call("git_diff", json!({"staged": true})).await.unwrap();
    assert_eq!(staged, "(no staged changes)");
    sh(&fx, "git add f.txt").await;
    let staged = fx
        .call("git_diff", json!({"staged": true, "path": "f.txt"}))
        .await
        .unwrap();
    assert!(staged.contains("-old\n+new"), "{staged}");
}

#[tokio::test]
async fn git_diff_refuses_a_path_outside_the_workspace() {
    let (fx, _home) = git_fixture();
    sh(&fx, "git init -q").await;
    let err = fx
        .call("git_diff", json!({"path": "../outside"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
}

#[tokio::test]
async fn git_does_not_use_a_repository_above_the_workspace() {
    let (fx, _home) = git_fixture();
    // The workspace's parent is a repository; the workspace itself is not.
    let parent = fx.root.parent().unwrap();
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(parent)
        .status()
        .unwrap();
    assert!(init.success());
    std::fs::write(inside(&fx, "x.txt"), "x").unwrap();
    let err = fx.call("git_status", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("not a git repository"), "{err}");
}

/// `git ARGS` in `dir` with a fixed identity; its stdout.
fn git_in(dir: &std::path::Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// Makes `fx.outside` a repository with one commit of `secret.txt`.
fn outside_repository(fx: &Fixture) -> String {
    git_in(&fx.outside, &["init", "-q"]);
    git_in(&fx.outside, &["add", "secret.txt"]);
    git_in(&fx.outside, &["commit", "-q", "-m", "outside commit"]);
    git_in(&fx.outside, &["rev-parse", "HEAD"])
}

#[tokio::test]
async fn git_refuses_a_gitdir_file_pointing_outside_the_workspace() {
    let (fx, _home) = git_fixture();
    let head = outside_repository(&fx);
    std::fs::write(
        inside(&fx, ".git"),
        format!("gitdir: {}\n", fx.outside.join(".git").display()),
    )
    .unwrap();
    std::fs::write(inside(&fx, "new.txt"), "new\n").unwrap();

    for (tool, arguments) in [
        ("git_log", json!({})),
        ("git_status", json!({})),
        ("git_diff", json!({})),
        ("git_commit", json!({"message": "escape", "all": true})),
    ] {
        let err = fx.call(tool, arguments).await.unwrap_err().to_string();
        assert!(err.contains(".git is a file"), "{tool}: {err}");
        assert!(!err.contains("outside commit"), "{tool}: {err}");
    }
    assert_eq!(git_in(&fx.outside, &["rev-parse", "HEAD"]), head);
    assert_eq!(git_in(&fx.outside, &["status", "--porcelain"]), "");
}

#[tokio::test]
async fn git_refuses_a_symlinked_git_directory() {
    let (fx, _home) = git_fixture();
    let head = outside_repository(&fx);
    std::os::unix::fs::symlink(fx.outside.join(".git"), inside(&fx, ".git")).unwrap();
    let err = fx.call("git_log", json!({})).await.unwrap_err().to_string();
    assert!(err.contains(".git is a symlink"), "{err}");
    let err = fx
        .call("git_commit", json!({"message": "escape", "all": true}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(".git is a symlink"), "{err}");
    assert_eq!(git_in(&fx.outside, &["rev-parse", "HEAD"]), head);
}

#[tokio::test]
async fn git_ignores_a_core_worktree_outside_the_workspace() {
    let (fx, _home) = git_fixture();
    sh(&fx, "git init -q").await;
    std::fs::write(inside(&fx, "mine.txt"), "mine\n").unwrap();
    let config = inside(&fx, ".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("[core]\n\tworktree = {}\n", fx.outside.display()));
    std::fs::write(&config, text).unwrap();

    let status = fx.call("git_status", json!({})).await.unwrap();
    assert!(status.contains("mine.txt"), "{status}");
    assert!(!status.contains("secret.txt"), "{status}");
    fx.call("git_commit", json!({"message": "mine", "all": true}))
        .await
        .unwrap();
    let tree = git_in(&fx.root, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert_eq!(tree, "mine.txt\n");
    assert!(!fx.outside.join(".git").exists());
}

/// A failing git tool carries git's own explanation, whichever stream git wrote it
/// to: `nothing to commit` is on stdout, `does not have any commits yet` on stderr.
#[tokio::test]
async fn failing_git_tools_say_why_from_stdout_and_from_stderr() {
    let (fx, _home) = git_fixture();
    sh(&fx, "git init -q").await;
    let log = fx.call("git_log", json!({})).await.unwrap_err().to_string();
    assert!(log.contains("does not have any commits yet"), "{log}");

    fx.call("file_write", json!({"path": "a.txt", "content": "a\n"}))
        .await
        .unwrap();
    fx.call("git_commit", json!({"message": "First", "all": true}))
        .await
        .unwrap();
    let nothing = fx
        .call("git_commit", json!({"message": "Again", "all": true}))
        .await
        .unwrap_err()
        .to_string();
    // The reason is on the first line: a one-line view of the result shows it.
    assert_eq!(
        nothing.lines().next().unwrap(),
        "git commit --message=Again failed (exit code 1): nothing to commit, working tree clean",
        "{nothing}"
    );
}
