//! The trusted blueprints directory: read and validated once, at start, then offered
//! by name only.
//!
//! Every `*.yaml` / `*.yml` regular file directly inside the directory is parsed and
//! validated; a blueprint is keyed by its `name:` field, not its file name. A file that
//! does not validate (or that repeats a name already taken, or that is too large) is
//! reported and left out; the server still starts. Requests name a blueprint, never a
//! path: a name must match `[a-z0-9_-]+` before it is even looked up, and the lookup is
//! in memory, so no request can make the server read a file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use boitata_blueprint::{Blueprint, MAX_BLUEPRINT_BYTES};

/// The blueprints a server offers.
#[derive(Debug, Clone, Default)]
pub struct BlueprintCatalog {
    entries: BTreeMap<String, CatalogEntry>,
}

/// One offered blueprint.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    /// The validated blueprint.
    pub blueprint: Arc<Blueprint>,
    /// The file it was read from.
    pub file: PathBuf,
}

/// A file of the directory that is not offered, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The file.
    pub file: PathBuf,
    /// Why (the validation diagnostics, one `file:line:col: message` per line).
    pub reason: String,
}

/// The blueprints directory itself could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the blueprints directory {dir}: {source} (pass an existing directory with --blueprints-dir)")]
pub struct CatalogError {
    /// The directory.
    pub dir: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

/// Why a requested blueprint name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// Not of the form `[a-z0-9_-]+` (a path, say).
    #[error("invalid blueprint name {0:?}: a blueprint is named by [a-z0-9_-]+, never a path")]
    InvalidName(String),
    /// No offered blueprint has this name.
    #[error("no blueprint named {name:?} (offered: {offered})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names offered, comma-separated.
        offered: String,
    },
}

/// Whether `name` is a blueprint name: non-empty, only `a-z`, `0-9`, `_` and `-`.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl BlueprintCatalog {
    /// Reads and validates every blueprint file directly in `dir` (sorted by file
    /// name, so which of two files with the same blueprint name wins is stable: the
    /// first). Returns the catalog and the files left out.
    ///
    /// # Errors
    /// [`CatalogError`] when `dir` cannot be listed.
    pub fn load(dir: &Path) -> Result<(Self, Vec<Rejected>), CatalogError> {
        let wrap = |source| CatalogError {
            dir: dir.to_path_buf(),
            source,
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(wrap)?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| {
                path.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| e == "yaml" || e == "yml")
            })
            .collect();
        files.sort();

        let mut catalog = BlueprintCatalog::default();
        let mut rejected = Vec::new();
        for file in files {
            match read_one(&file) {
                Ok(blueprint) => {
                    if let Some(first) = catalog.entries.get(&blueprint.name) {
                        rejected.push(Rejected {
                            reason: format!(
                                "blueprint name {:?} is already taken by {}; rename one of them",
                                blueprint.name,
                                first.file.display()
                            ),
                            file,
                        });
                        continue;
                    }
                    catalog.entries.insert(
                        blueprint.name.clone(),
                        CatalogEntry {
                            blueprint: Arc::new(blueprint),
                            file,
                        },
                    );
                }
                Err(reason) => rejected.push(Rejected { file, reason }),
            }
        }
        Ok((catalog, rejected))
    }

    /// A catalog of these blueprints (for embedding and tests).
    pub fn from_blueprints(blueprints: impl IntoIterator<Item = Blueprint>) -> Self {
        let entries = blueprints
            .into_iter()
            .map(|b| {
                (
                    b.name.clone(),
                    CatalogEntry {
                        file: PathBuf::from(format!("{}.yaml", b.name)),
                        blueprint: Arc::new(b),
                    },
                )
            })
            .collect();
        BlueprintCatalog { entries }
    }

    /// Removes the blueprint named `name` (one that cannot run here, say).
    pub fn remove(&mut self, name: &str) -> Option<CatalogEntry> {
        self.entries.remove(name)
    }

    /// The blueprint named `name`.
    ///
    /// # Errors
    /// [`LookupError::InvalidName`] unless `name` is `[a-z0-9_-]+`;
    /// [`LookupError::Unknown`] when no offered blueprint has it.
    pub fn get(&self, name: &str) -> Result<&CatalogEntry, LookupError> {
        if !is_valid_name(name) {
            return Err(LookupError::InvalidName(name.to_owned()));
        }
        self.entries.get(name).ok_or_else(|| LookupError::Unknown {
            name: name.to_owned(),
            offered: if self.entries.is_empty() {
                "none".to_owned()
            } else {
                self.entries.keys().cloned().collect::<Vec<_>>().join(", ")
            },
        })
    }

    /// The offered blueprints, by name.
    pub fn iter(&self) -> impl Iterator<Item = &CatalogEntry> {
        self.entries.values()
    }

    /// How many blueprints are offered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is offered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Reads and validates one file; the error is the reason to show.
fn read_one(file: &Path) -> Result<Blueprint, String> {
    let meta = std::fs::metadata(file).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".to_owned());
    }
    if meta.len() > MAX_BLUEPRINT_BYTES as u64 {
        return Err(format!(
            "{} bytes is over the {MAX_BLUEPRINT_BYTES}-byte limit for a blueprint",
            meta.len()
        ));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read: {e}"))?;
    let label = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.display().to_string());
    boitata_blueprint::parse(&text, &label)
        .map(|validated| validated.blueprint)
        .map_err(|diagnostics| diagnostics.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_words_never_paths() {
        for good in ["hello", "test_fix-loop", "a1"] {
            assert!(is_valid_name(good), "{good}");
        }
        for bad in [
            "",
            "../x",
            "a/b",
            "%2e%2e",
            "/etc/passwd",
            "A",
            "a.b",
            "a b",
            "..",
        ] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }
}
