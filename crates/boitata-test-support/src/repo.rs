//! Real git repositories in temp dirs.

use std::path::Path;
use std::process::Command;

/// A git repository in a temp dir with one commit (a README), removed on drop.
pub struct TempRepo {
    dir: tempfile::TempDir,
}

impl TempRepo {
    /// A fresh repository whose first commit holds `README.md`.
    ///
    /// # Panics
    /// When git is missing or fails: this is test support.
    pub fn new() -> Self {
        Self::with_files(&[("README.md", "# test repo\n")])
    }

    /// A fresh repository whose first commit holds `files` (path, contents).
    ///
    /// # Panics
    /// When git is missing or fails.
    pub fn with_files(files: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        for (path, contents) in files {
            let full = dir.path().join(path);
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir: {e}"));
            }
            std::fs::write(&full, contents).unwrap_or_else(|e| panic!("write {path}: {e}"));
        }
        let repo = TempRepo { dir };
        repo.git(&["init", "--quiet", "--initial-branch=main"]);
        repo.git(&["add", "-A"]);
        repo.git(&["commit", "--quiet", "-m", "initial"]);
        repo
    }

    /// The repository's root.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `git ARGS` in the repository (with a fixed identity) and returns stdout.
    ///
    /// # Panics
    /// When git fails.
    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=test",
                "-c",
                "user.email=test@localhost",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("git {args:?}: {e}"));
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The current commit id.
    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"]).trim().to_owned()
    }
}

impl Default for TempRepo {
    fn default() -> Self {
        Self::new()
    }
}
