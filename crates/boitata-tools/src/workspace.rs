//! The workspace: the one directory the agent's file tools may touch.
//!
//! A [`Workspace`] is opened on a root directory and holds a [`cap_std::fs::Dir`] handle to
//! it. Every path a tool passes in is resolved *beneath* that handle: on Linux, cap-std
//! opens with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so the kernel itself
//! refuses a `..` that climbs out, an absolute path, and a symbolic link that leads out
//! (absolute or relative, pre-existing or created a moment ago, dangling or not). New
//! files are created through the same handle, so a write through a dangling link that
//! points outside fails instead of creating the file outside.
//!
//! Before the kernel sees a path, [`Workspace::relative`] normalises it lexically:
//! - an absolute path is accepted only if it lies inside the root, compared component by
//!   component (`/tmp/ws-evil` is not inside `/tmp/ws`), and is made relative;
//! - `.` is dropped and `..` is applied to the preceding component; a `..` that would
//!   climb above the root is refused.
//!
//! A refused path is [`WorkspaceError::OutsideWorkspace`], whose message names the path.
//! Nothing here panics on any input.
//!
//! What this does **not** confine: commands run by `execute_command` and git see the
//! host with the user's rights; only operations that go through this type are confined.
//!
//! # Example
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use boitata_tools::workspace::{Workspace, WorkspaceError};
//!
//! let dir = tempfile::tempdir()?;
//! let ws = Workspace::open(dir.path())?;
//! ws.write("src/new/file.txt", "hello")?;
//! assert_eq!(ws.read_to_string("src/new/file.txt")?, "hello");
//! assert!(matches!(ws.read("../etc/passwd"), Err(WorkspaceError::OutsideWorkspace { .. })));
//! assert!(matches!(ws.read("/etc/passwd"), Err(WorkspaceError::OutsideWorkspace { .. })));
//! # Ok(())
//! # }
//! ```

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

/// The workspace root every tool path resolves beneath.
///
/// Cheap to clone: clones share one directory handle.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The canonical root (no symlinks, absolute).
    root: PathBuf,
    /// The root as the caller gave it, made absolute (may differ from `root` when it
    /// goes through a symlink); absolute tool paths may be written against either.
    given_root: PathBuf,
    dir: Arc<Dir>,
}

/// What kind of thing a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only reported where links are not followed).
    Symlink,
    /// Anything else: a FIFO, a socket, a device.
    Other,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The file name (not UTF-8 bytes are replaced with U+FFFD).
    pub name: String,
    /// What it is, without following a symbolic link.
    pub kind: EntryKind,
    /// For a symbolic link, the target it holds (not resolved, not checked).
    pub link_target: Option<PathBuf>,
}

/// What [`Workspace::metadata`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    /// What the path names.
    pub kind: EntryKind,
    /// Its size in bytes.
    pub len: u64,
}

/// A refused path or a failed file operation in the workspace.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The path resolves outside the workspace root (by `..`, by being absolute, or
    /// through a symbolic link), so it was refused.
    #[error(
        "{}: outside the workspace (root {}); use a path beneath the workspace root",
        .path.display(),
        .root.display()
    )]
    OutsideWorkspace {
        /// The path as it was asked for.
        path: PathBuf,
        /// The workspace root.
        root: PathBuf,
    },
    /// The root itself could not be opened.
    #[error("cannot open workspace {}: {}", .root.display(), describe(.source))]
    OpenRoot {
        /// The root as given.
        root: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// An operation on a path beneath the root failed.
    #[error("cannot {action} {}: {}", .path.display(), describe(.source))]
    WithPath {
        /// The path as it was asked for.
        path: PathBuf,
        /// What was being done: `read`, `write`, `list`, …
        action: &'static str,
        /// The cause.
        source: io::Error,
    },
    /// The path names something that is not a regular file (a directory, a FIFO, a
    /// device) where a file was needed.
    #[error("cannot {action} {}: not a regular file ({kind})", .path.display())]
    NotAFile {
        /// The path as it was asked for.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// What it is instead: `directory`, `fifo or device`, …
        kind: &'static str,
    },
}

/// An `io::Error` in the lower-case words of our messages.
fn describe(err: &io::Error) -> String {
    match err.kind() {
        io::ErrorKind::NotFound => "no such file or directory".to_owned(),
        io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        io::ErrorKind::AlreadyExists => "already exists".to_owned(),
        io::ErrorKind::IsADirectory => "is a directory".to_owned(),
        io::ErrorKind::NotADirectory => "not a directory".to_owned(),
        io::ErrorKind::InvalidData => "not valid UTF-8 text".to_owned(),
        _ => err.to_string(),
    }
}

/// cap-std reports an escape as `PermissionDenied` with its own message and no OS
/// error code (a real `EACCES` carries one).
fn is_escape(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied && err.raw_os_error().is_none()
}

impl Workspace {
    /// Opens the workspace rooted at `root` (which must be an existing directory).
    ///
    /// # Errors
    /// [`WorkspaceError::OpenRoot`] if `root` does not exist, is not a directory, or
    /// cannot be opened.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, WorkspaceError> {
        let given = root.as_ref();
        let open_err = |source| WorkspaceError::OpenRoot {
            root: given.to_path_buf(),
            source,
        };
        let given_root = std::path::absolute(given).map_err(open_err)?;
        let canonical = std::fs::canonicalize(given).map_err(open_err)?;
        let dir = Dir::open_ambient_dir(&canonical, ambient_authority()).map_err(open_err)?;
        Ok(Workspace {
            root: canonical,
            given_root,
            dir: Arc::new(dir),
        })
    }

    /// The root on the host: absolute and canonical (no symlinks).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Makes `path` relative to the root, lexically, without touching the filesystem.
    ///
    /// An absolute path inside the root loses the root prefix (compared component by
    /// component, against the canonical root or the root as given to [`open`]); `.`
    /// components are dropped; `..` removes the preceding component. The root itself is
    /// `"."`. The result has only normal components, but may still name a symbolic
    /// link: the other methods resolve it beneath the root.
    ///
    /// [`open`]: Workspace::open
    ///
    /// # Errors
    /// [`WorkspaceError::OutsideWorkspace`] for an absolute path outside the root or a
    /// `..` that climbs above it.
    pub fn relative(&self, path: impl AsRef<Path>) -> Result<PathBuf, WorkspaceError> {
        let path = path.as_ref();
        let beneath = if path.is_absolute() {
            path.strip_prefix(&self.root)
                .or_else(|_| path.strip_prefix(&self.given_root))
                .map_err(|_| self.outside(path))?
        } else {
            path
        };
        let mut normal = PathBuf::new();
        for component in beneath.components() {
            match component {
                Component::Normal(name) => normal.push(name),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !normal.pop() {
                        return Err(self.outside(path));
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Err(self.outside(path)),
            }
        }
        if normal.as_os_str().is_empty() {
            normal.push(".");
        }
        Ok(normal)
    }

    /// Reads the whole file at `path`.
    ///
    /// # Errors
    /// [`WorkspaceError::OutsideWorkspace`] if the path leads outside the root;
    /// [`WorkspaceError::NotAFile`] for a directory, FIFO or device;
    /// [`WorkspaceError::WithPath`] if reading fails.
    pub fn read(&self, path: impl AsRef<Path>) -> Result<Vec<u8>, WorkspaceError> {
        let path = path.as_ref();
        let mut file = self.open_file(path)?;
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| self.fail(path, "read", e))?;
        Ok(bytes)
    }

    /// Reads the whole file at `path` as UTF-8 text.
    ///
    /// # Errors
    /// As [`read`](Workspace::read), and [`WorkspaceError::WithPath`] if the file is
    /// not valid UTF-8.
    pub fn read_to_string(&self, path: impl AsRef<Path>) -> Result<String, WorkspaceError> {
        let path = path.as_ref();
        let bytes = self.read(path)?;
        String::from_utf8(bytes)
            .map_err(|e| self.fail(path, "read", io::Error::new(io::ErrorKind::InvalidData, e)))
    }

    /// Opens the regular file at `path` for reading.
    ///
    /// The file is opened non-blocking and checked after opening, so a FIFO cannot hang
    /// the caller and a swap between check and open cannot matter.
    ///
    /// # Errors
    /// [`WorkspaceError::OutsideWorkspace`], [`WorkspaceError::NotAFile`] or
    /// [`WorkspaceError::WithPath`].
    pub fn open_file(&self, path: impl AsRef<Path>) -> Result<std::fs::File, WorkspaceError> {
        let path = path.as_ref();
        let file = self.open_nonblocking(path, "read")?;
        let meta = file.metadata().map_err(|e| self.fail(path, "read", e))?;
        if !meta.is_file() {
            return Err(WorkspaceError::NotAFile {
                path: path.to_path_buf(),
                action: "read",
                kind: if meta.is_dir() {
                    "directory"
                } else {
                    "fifo, socket or device"
                },
            });
        }
        Ok(file.into_std())
    }

    /// Writes `contents` to the file at `path`, creating it and any missing parent
    /// directories, and replacing what was there.
    ///
    /// # Errors
    /// [`WorkspaceError::OutsideWorkspace`] if the path or any parent leads outside the
    /// root (including through a dangling symbolic link); [`WorkspaceError::WithPath`] if
    /// creating or writing fails.
    pub fn write(
        &self,
        path: impl AsRef<Path>,
        contents: impl AsRef<[u8]>,
    ) -> Result<(), WorkspaceError> {
        let path = path.as_ref();
        let rel = self.relative(path)?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.dir
                .create_dir_all(parent)
                .map_err(|e| self.fail(path, "create the parent directories of", e))?;
        }
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        let mut file = self
            .dir
            .open_with(&rel, &options)
            .map_err(|e| self.fail(path, "write", e))?;
        io::Write::write_all(&mut file, contents.as_ref())
            .map_err(|e| self.fail(path, "write", e))?;
        Ok(())
    }

    /// Creates the directory at `path` and any missing parents.
    ///
    /// # Errors
    /// [`WorkspaceError::OutsideWorkspace`] or [`WorkspaceError::WithPath`].
    pub fn create_dir_all(&self, path: impl AsRef<Path>) -> Result<(), WorkspaceError> {
        let path = path.as_ref();
        let rel = self.relative(path)?;
        self.dir
            .create_dir_all(&rel)
            .map_err(|e| self.fail(path, "create directory", e))
    }

    /// Lists the directory at `path`, sorted by name. Symbolic links are reported as
    /// links (with their target), not followed.
    ///
    /// # Errors
    /// [`WorkspaceError::OutsideWorkspace`] or [`WorkspaceError::WithPath`].
    pub fn list_dir(&self, path: impl AsRef<Path>) -> Result<Vec<DirEntry>, WorkspaceError> {
        let path = path.as_ref();
        let rel = self.relative(path)?;
        let dir = self
            .dir
            .open_dir(&rel)
            .map_err(|e| self.fail(path, "list", e))?;
        let mut entries = Vec::new();
        for entry in dir.entries().map_err(|e| self.fail(path, "list", e))? {
            let entry = entry.map_err(|e| self.fail(path, "list", e))?;
            let file_type = entry.file_type().map_err(|e| self.fail(path, "list", e))?;
            let kind = kind_of(file_type);
            let name_os = entry.file_name();
            let link_target = if kind == EntryKind::Symlink {
                dir.read_link_contents(&name_os).ok()
            } else {
                None
            };
            entries.push(DirEntry {
                name: name_os.to_string_lossy().into_owned(),
                kind,
                link_target,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// What `path` names, following symbolic links (beneath the root only).
    ///
    /// # Errors
    /// [`WorkspaceError::OutsideWorkspace`] or [`WorkspaceError::WithPath`].
    pub fn metadata(&self, path: impl AsRef<Path>) -> Result<Metadata, WorkspaceError> {
        let path = path.as_ref();
        let rel = self.relative(path)?;
        let meta = self
            .dir
            .metadata(&rel)
            .map_err(|e| self.fail(path, "inspect", e))?;
        Ok(Metadata {
            kind: kind_of(meta.file_type()),
            len: meta.len(),
        })
    }

    /// The host path `path` resolves to: absolute, canonical, beneath [`root`].
    ///
    /// The path is opened beneath the root and the kernel is asked which file it
    /// opened (`/proc/self/fd`), so the answer reflects symbolic links exactly as the
    /// other methods resolve them. Useful for handing a confined location to code that
    /// wants a host path (the search walker).
    ///
    /// [`root`]: Workspace::root
    ///
    /// # Errors
    /// [`WorkspaceError::OutsideWorkspace`] or [`WorkspaceError::WithPath`] (also when
    /// `/proc` is not mounted).
    pub fn real_path(&self, path: impl AsRef<Path>) -> Result<PathBuf, WorkspaceError> {
        let path = path.as_ref();
        let file = self.open_nonblocking(path, "resolve")?;
        let fd_link = format!("/proc/self/fd/{}", file.as_raw_fd());
        let real = std::fs::read_link(fd_link).map_err(|e| self.fail(path, "resolve", e))?;
        if !real.starts_with(&self.root) {
            return Err(self.outside(path));
        }
        Ok(real)
    }

    /// Opens whatever `path` names for reading, non-blocking so that a FIFO cannot hang
    /// the caller; a failure is reported as failing to `action` the path.
    fn open_nonblocking(
        &self,
        path: &Path,
        action: &'static str,
    ) -> Result<cap_std::fs::File, WorkspaceError> {
        let rel = self.relative(path)?;
        let mut options = OpenOptions::new();
        options.read(true).custom_flags(nix::libc::O_NONBLOCK);
        self.dir
            .open_with(&rel, &options)
            .map_err(|e| self.fail(path, action, e))
    }

    fn outside(&self, path: &Path) -> WorkspaceError {
        WorkspaceError::OutsideWorkspace {
            path: path.to_path_buf(),
            root: self.root.clone(),
        }
    }

    /// The error for `source`, raised doing `action` on `path`. An operation can fail
    /// for a reason other than the escape itself (`mkdir` on a link to a directory
    /// outside says "already exists"), so on failure every ancestor of the path is
    /// checked too, and one that leads outside makes it an `OutsideWorkspace`.
    fn fail(&self, path: &Path, action: &'static str, source: io::Error) -> WorkspaceError {
        let escapes = is_escape(&source)
            || self.relative(path).is_ok_and(|rel| {
                rel.ancestors()
                    .filter(|a| !a.as_os_str().is_empty())
                    .any(|a| self.dir.metadata(a).is_err_and(|e| is_escape(&e)))
            });
        if escapes {
            self.outside(path)
        } else {
            WorkspaceError::WithPath {
                path: path.to_path_buf(),
                action,
                source,
            }
        }
    }
}

fn kind_of(file_type: cap_std::fs::FileType) -> EntryKind {
    if file_type.is_symlink() {
        EntryKind::Symlink
    } else if file_type.is_dir() {
        EntryKind::Dir
    } else if file_type.is_file() {
        EntryKind::File
    } else {
        EntryKind::Other
    }
}
