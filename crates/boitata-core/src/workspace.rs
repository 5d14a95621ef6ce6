//! Workspace confinement (placeholder: filled in by the tools work).
use std::path::PathBuf;

/// The workspace root every tool path resolves beneath.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// Opens `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, WorkspaceError> {
        Ok(Workspace { root: root.into() })
    }
    /// The root on the host.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }
}

/// A refused path or failed file operation.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WorkspaceError(String);
