//! Tar archives for [`Sandbox::upload`](crate::Sandbox::upload), built in memory.
//!
//! Entries are owned by uid/gid 0 and symlinks are stored as links (never followed),
//! so an archive of a host directory cannot carry files from outside it.

use std::io;
use std::path::Path;

/// An archive holding one regular file `name` (a relative path) with `contents` and
/// the permission bits `mode` (`0o644`).
///
/// # Errors
/// An I/O error if `name` is absolute, contains `..`, or is too long for a tar header.
pub fn single_file(name: &str, contents: &[u8], mode: u32) -> io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(contents.len() as u64);
    header.set_mode(mode);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(&mut header, name, contents)?;
    builder.into_inner()
}

/// An archive of everything beneath the host directory `dir`, with paths relative to
/// it. Symlinks are archived as symlinks.
///
/// # Errors
/// An I/O error naming the problem if `dir` cannot be read.
pub fn directory(dir: &Path) -> io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.mode(tar::HeaderMode::Deterministic);
    builder
        .append_dir_all(".", dir)
        .map_err(|e| io::Error::new(e.kind(), format!("archiving {}: {e}", dir.display())))?;
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_file_round_trips() {
        let bytes = single_file("dir/hello.txt", b"hi\n", 0o600).unwrap();
        let mut archive = tar::Archive::new(&bytes[..]);
        let mut entries = archive.entries().unwrap();
        let mut entry = entries.next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().to_str(), Some("dir/hello.txt"));
        assert_eq!(entry.header().mode().unwrap(), 0o600);
        let mut text = String::new();
        io::Read::read_to_string(&mut entry, &mut text).unwrap();
        assert_eq!(text, "hi\n");
    }

    #[test]
    fn single_file_refuses_escaping_names() {
        assert!(single_file("../evil", b"", 0o644).is_err());
    }

    #[test]
    fn directory_keeps_symlinks_as_links() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "a").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("link")).unwrap();
        let bytes = directory(tmp.path()).unwrap();
        let mut archive = tar::Archive::new(&bytes[..]);
        let mut kinds = Vec::new();
        for entry in archive.entries().unwrap() {
            let entry = entry.unwrap();
            kinds.push((
                entry.path().unwrap().to_string_lossy().into_owned(),
                entry.header().entry_type(),
            ));
        }
        assert!(
            kinds.contains(&("a.txt".into(), tar::EntryType::Regular)),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&("link".into(), tar::EntryType::Symlink)),
            "{kinds:?}"
        );
    }
}
