//! Finding and reading blueprint files.
//!
//! A blueprint is named on the command line either by path (`ci/fix.yaml`) or by
//! name (`test_fix_loop`), which [`find`] looks up as `NAME.yaml` (then `NAME.yml`)
//! in each search directory in turn: the CLI passes `./blueprints/` and then the user
//! config dir's `blueprints/` ([`default_search_dirs`]).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

use crate::diagnostic::Diagnostics;
use crate::validate::{parse, Validated};
use crate::yaml::MAX_BLUEPRINT_BYTES;

/// Why a blueprint could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read blueprint {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The path is a device, FIFO, socket or directory, not a regular file.
    #[error("cannot read blueprint {}: not a regular file (it is a {kind}); pass a .yaml file", path.display())]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is instead: `directory`, `FIFO`, `character device`, ...
        kind: &'static str,
    },
    /// The file is over [`MAX_BLUEPRINT_BYTES`].
    #[error("blueprint {} is over {MAX_BLUEPRINT_BYTES} bytes; blueprints are limited to {MAX_BLUEPRINT_BYTES} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The file is not a valid blueprint.
    #[error("{0}")]
    Invalid(Diagnostics),
}

/// Reads and validates the blueprint at `path` (named as given in diagnostics).
///
/// # Errors
/// [`LoadError`]: unreadable, not a regular file, too large (by the bytes read, at
/// most one over the limit), or invalid (with every diagnostic).
pub fn load(path: &Path) -> Result<Validated, LoadError> {
    let read_error = |source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    };
    // Refuse devices and FIFOs before opening them (opening can have effects), and
    // again on the opened file (the path may have changed in between).
    refuse_non_regular(path, &std::fs::metadata(path).map_err(read_error)?)?;
    // O_NONBLOCK: a FIFO swapped in after the check cannot block the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(read_error)?;
    refuse_non_regular(path, &file.metadata().map_err(read_error)?)?;
    // The size is enforced on what is read, not on what metadata claims.
    let limit = MAX_BLUEPRINT_BYTES as u64;
    let mut raw = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut raw)
        .map_err(read_error)?;
    if raw.len() as u64 > limit {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    let text = String::from_utf8(raw).map_err(|e| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text ({e})"),
        ))
    })?;
    parse(&text, &path.display().to_string()).map_err(LoadError::Invalid)
}

/// [`LoadError::NotRegularFile`] unless `metadata` is a regular file's.
fn refuse_non_regular(path: &Path, metadata: &std::fs::Metadata) -> Result<(), LoadError> {
    use std::os::unix::fs::FileTypeExt;
    let file_type = metadata.file_type();
    if file_type.is_file() {
        return Ok(());
    }
    let kind = if file_type.is_dir() {
        "directory"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_char_device() {
        "character device"
    } else if file_type.is_block_device() {
        "block device"
    } else if file_type.is_socket() {
        "socket"
    } else {
        "special file"
    };
    Err(LoadError::NotRegularFile {
        path: path.to_path_buf(),
        kind,
    })
}

/// A blueprint name or path that matches no file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FindError {
    /// A path that does not exist.
    #[error("no blueprint file at {}", .0.display())]
    NoFile(PathBuf),
    /// A name found in no search directory.
    #[error("no blueprint named {name:?}: looked for {name}.yaml in {}; pass a file path or put the file in one of them", list(.searched))]
    NotFound {
        /// The name.
        name: String,
        /// The directories searched.
        searched: Vec<PathBuf>,
    },
}

fn list(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "no directories".to_owned();
    }
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// True for a blueprint name: `[a-z0-9_-]+`.
pub fn is_name(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Resolves `name_or_path`: an existing file, anything that looks like a path (has a
/// `/` or a `.yaml`/`.yml` suffix), or a name looked up in `search_dirs` in order.
/// A path that exists but is not a regular file (`/dev/zero`, a FIFO) is returned as
/// is, so that [`load`] refuses it by what it is rather than as missing.
///
/// # Errors
/// [`FindError`] when nothing matches.
pub fn find(name_or_path: &str, search_dirs: &[PathBuf]) -> Result<PathBuf, FindError> {
    let as_path = Path::new(name_or_path);
    if as_path.is_file() {
        return Ok(as_path.to_path_buf());
    }
    let looks_like_path = name_or_path.contains(std::path::MAIN_SEPARATOR)
        || name_or_path.contains('/')
        || name_or_path.ends_with(".yaml")
        || name_or_path.ends_with(".yml")
        || !is_name(name_or_path);
    if looks_like_path {
        if std::fs::symlink_metadata(as_path).is_ok() {
            return Ok(as_path.to_path_buf());
        }
        return Err(FindError::NoFile(as_path.to_path_buf()));
    }
    for dir in search_dirs {
        for extension in ["yaml", "yml"] {
            let candidate = dir.join(format!("{name_or_path}.{extension}"));
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(FindError::NotFound {
        name: name_or_path.to_owned(),
        searched: search_dirs.to_vec(),
    })
}

/// `./blueprints`, then `blueprints/` in the user config dir
/// (`~/.config/boitata/blueprints` on Linux).
pub fn default_search_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from("blueprints")];
    if let Some(config) = boitata_core::config::user_config_dir() {
        dirs.push(config.join("blueprints"));
    }
    dirs
}
