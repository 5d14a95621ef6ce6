//! Confinement: no path a tool gets may read or write outside the workspace root, by
//! `..`, by an absolute path, or through any symbolic link; writes inside work.

// Set-up helpers: a failed set-up is a failed test.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use boitata_tools::workspace::{EntryKind, Workspace, WorkspaceError};
use proptest::prelude::*;
use serde_json::json;

use super::tool_support::{assert_refused, inside, Fixture, SECRET};

#[tokio::test]
async fn dotdot_is_refused_for_read_and_write() {
    let fx = Fixture::new();
    assert_refused(
        fx.call("file_read", json!({"path": "../outside/secret.txt"}))
            .await,
        "../outside/secret.txt",
    );
    assert_refused(
        fx.call("file_write", json!({"path": "../x", "content": "escaped"}))
            .await,
        "../x",
    );
    assert_refused(
        fx.call(
            "file_write",
            json!({"path": "../outside/new.txt", "content": "escaped"}),
        )
        .await,
        "../outside/new.txt",
    );
    assert!(!fx.root.parent().unwrap().join("x").exists());
    fx.assert_outside_untouched();
}

#[tokio::test]
async fn dotdot_after_a_directory_is_refused() {
    let fx = Fixture::new();
    std::fs::create_dir(inside(&fx, "a")).unwrap();
    assert_refused(
        fx.call("file_read", json!({"path": "a/../../outside/secret.txt"}))
            .await,
        "a/../../outside/secret.txt",
    );
    assert_refused(
        fx.call(
            "file_write",
            json!({"path": "a/../../x", "content": "escaped"}),
        )
        .await,
        "a/../../x",
    );
    assert!(!fx.root.parent().unwrap().join("x").exists());
    fx.assert_outside_untouched();
}

#[tokio::test]
async fn absolute_paths_outside_are_refused() {
    let fx = Fixture::new();
    assert_refused(
        fx.call("file_read", json!({"path": "/etc/passwd"})).await,
        "/etc/passwd",
    );
    let secret = fx.outside.join("secret.txt");
    let secret = secret.to_str().unwrap();
    assert_refused(fx.call("file_read", json!({"path": secret})).await, secret);
    let target = fx.outside.join("new.txt");
    let target = target.to_str().unwrap();
    assert_refused(
        fx.call("file_write", json!({"path": target, "content": "escaped"}))
            .await,
        target,
    );
    fx.assert_outside_untouched();
}

#[tokio::test]
async fn absolute_path_inside_the_root_is_accepted() {
    let fx = Fixture::new();
    let path = fx.root.join("sub/abs.txt");
    let out = fx
        .call(
            "file_write",
            json!({"path": path.to_str().unwrap(), "content": "inside"}),
        )
        .await
        .unwrap();
    assert!(out.contains("created"), "{out}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "inside");
    let read = fx
        .call("file_read", json!({"path": path.to_str().unwrap()}))
        .await
        .unwrap();
    assert_eq!(read, "inside");
}

#[tokio::test]
async fn a_sibling_sharing_the_root_prefix_is_outside() {
    // Root `BASE/ws`, sibling `BASE/ws-evil`: a string-prefix check would let it in.
    let fx = Fixture::new();
    let evil = PathBuf::from(format!("{}-evil", fx.root.display()));
    std::fs::create_dir(&evil).unwrap();
    std::fs::write(evil.join("secret.txt"), SECRET).unwrap();
    let secret = evil.join("secret.txt");
    let secret = secret.to_str().unwrap();
    assert_refused(fx.call("file_read", json!({"path": secret})).await, secret);
    let target = evil.join("planted.txt");
    let target = target.to_str().unwrap();
    assert_refused(
        fx.call("file_write", json!({"path": target, "content": "escaped"}))
            .await,
        target,
    );
    assert!(!evil.join("planted.txt").exists());
    assert_refused(
        fx.call("file_read", json!({"path": "../ws-evil/secret.txt"}))
            .await,
        "../ws-evil/secret.txt",
    );
}

#[tokio::test]
async fn a_symlink_to_slash_is_refused_for_read_and_write() {
    let fx = Fixture::new();
    symlink("/", inside(&fx, "slash")).unwrap();
    let read_path = format!("slash/{}/secret.txt", fx.outside_from_slash());
    assert_refused(
        fx.call("file_read", json!({"path": read_path})).await,
        &read_path,
    );
    let write_path = format!("slash/{}/new.txt", fx.outside_from_slash());
    assert_refused(
        fx.call(
            "file_write",
            json!({"path": write_path, "content": "escaped"}),
        )
        .await,
        &write_path,
    );
    assert_refused(
        fx.call("file_read", json!({"path": "slash/etc/passwd"}))
            .await,
        "slash/etc/passwd",
    );
    assert_refused(fx.call("list_dir", json!({"path": "slash"})).await, "slash");
    fx.assert_outside_untouched();
}

#[tokio::test]
async fn a_symlink_the_agent_creates_with_execute_command_is_refused() {
    let fx = Fixture::new();
    let made = fx
        .call(
            "execute_command",
            json!({"command": "ln -s / esc && echo made"}),
        )
        .await
        .unwrap();
    assert!(made.contains("made"), "{made}");
    assert!(std::fs::symlink_metadata(inside(&fx, "esc"))
        .unwrap()
        .file_type()
        .is_symlink());

    let read_path = format!("esc/{}/secret.txt", fx.outside_from_slash());
    assert_refused(
        fx.call("file_read", json!({"path": read_path})).await,
        &read_path,
    );
    let write_path = format!("esc/{}/planted.txt", fx.outside_from_slash());
    assert_refused(
        fx.call(
            "file_write",
            json!({"path": write_path, "content": "escaped"}),
        )
        .await,
        &write_path,
    );
    let edit_path = format!("esc/{}/secret.txt", fx.outside_from_slash());
    assert_refused(
        fx.call(
            "file_edit",
            json!({"path": edit_path, "old_string": "TOP", "new_string": "OWNED"}),
        )
        .await,
        &edit_path,
    );
    fx.assert_outside_untouched();
}

#[tokio::test]
async fn a_symlinked_directory_pointing_outside_is_refused() {
    let fx = Fixture::new();
    symlink(&fx.outside, inside(&fx, "abs_link")).unwrap();
    symlink("../outside", inside(&fx, "rel_link")).unwrap();
    for link in ["abs_link", "rel_link"] {
        let secret = format!("{link}/secret.txt");
        assert_refused(fx.call("file_read", json!({"path": secret})).await, &secret);
        let planted = format!("{link}/planted.txt");
        assert_refused(
            fx.call("file_write", json!({"path": planted, "content": "escaped"}))
                .await,
            &planted,
        );
        let nested = format!("{link}/new_dir/planted.txt");
        assert_refused(
            fx.call("file_write", json!({"path": nested, "content": "escaped"}))
                .await,
            &nested,
        );
        assert_refused(fx.call("list_dir", json!({"path": link})).await, link);
        assert_refused(
            fx.call("search", json!({"pattern": "SECRET", "path": link}))
                .await,
            link,
        );
    }
    // Searching the whole workspace does not follow the links out either.
    let found = fx
        .call("search", json!({"pattern": "TOP-SECRET"}))
        .await
        .unwrap();
    assert!(!found.contains(SECRET), "{found}");
    fx.assert_outside_untouched();
}

#[tokio::test]
async fn a_dangling_symlink_pointing_outside_is_not_written_through() {
    let fx = Fixture::new();
    symlink(fx.outside.join("created.txt"), inside(&fx, "dangling_abs")).unwrap();
    symlink("../outside/created2.txt", inside(&fx, "dangling_rel")).unwrap();
    for link in ["dangling_abs", "dangling_rel"] {
        assert_refused(
            fx.call("file_write", json!({"path": link, "content": "escaped"}))
                .await,
            link,
        );
    }
    assert!(!fx.outside.join("created.txt").exists());
    assert!(!fx.outside.join("created2.txt").exists());
    fx.assert_outside_untouched();
}

#[tokio::test]
async fn writes_inside_succeed_including_new_nested_directories() {
    let fx = Fixture::new();
    let out = fx
        .call(
            "file_write",
            json!({"path": "a/b/c/new.txt", "content": "deep"}),
        )
        .await
        .unwrap();
    assert!(out.contains("a/b/c/new.txt"), "{out}");
    assert_eq!(
        std::fs::read_to_string(inside(&fx, "a/b/c/new.txt")).unwrap(),
        "deep"
    );
    fx.call("file_write", json!({"path": "./top.txt", "content": "top"}))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(inside(&fx, "top.txt")).unwrap(),
        "top"
    );
    fx.assert_outside_untouched();
}

#[tokio::test]
async fn a_symlink_that_stays_inside_is_followed() {
    let fx = Fixture::new();
    std::fs::create_dir(inside(&fx, "real")).unwrap();
    std::fs::write(inside(&fx, "real/file.txt"), "through the link").unwrap();
    symlink("real", inside(&fx, "alias")).unwrap();
    let read = fx
        .call("file_read", json!({"path": "alias/file.txt"}))
        .await
        .unwrap();
    assert_eq!(read, "through the link");
    fx.call(
        "file_write",
        json!({"path": "alias/written.txt", "content": "via alias"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(inside(&fx, "real/written.txt")).unwrap(),
        "via alias"
    );
}

#[test]
fn workspace_errors_are_typed() {
    let fx = Fixture::new();
    let ws = Workspace::open(&fx.root).unwrap();
    assert!(matches!(
        ws.read("../outside/secret.txt"),
        Err(WorkspaceError::OutsideWorkspace { .. })
    ));
    assert!(matches!(
        ws.read("missing.txt"),
        Err(WorkspaceError::WithPath { .. })
    ));
    assert!(matches!(
        Workspace::open(fx.root.join("no-such-dir")),
        Err(WorkspaceError::OpenRoot { .. })
    ));
    std::fs::create_dir(inside(&fx, "d")).unwrap();
    assert!(matches!(ws.read("d"), Err(WorkspaceError::NotAFile { .. })));
    assert_eq!(ws.metadata("d").unwrap().kind, EntryKind::Dir);
    assert_eq!(
        ws.relative(fx.root.join("x/./y/../z")).unwrap(),
        Path::new("x/z")
    );
    assert_eq!(ws.relative("").unwrap(), Path::new("."));
}

#[test]
fn a_fifo_does_not_hang_a_read() {
    let fx = Fixture::new();
    let status = std::process::Command::new("mkfifo")
        .arg(inside(&fx, "pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let ws = Workspace::open(&fx.root).unwrap();
    // Read on a thread: if opening blocks (no writer will ever come), fail, not hang.
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || sender.send(ws.read("pipe")));
    let result = receiver
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("reading a FIFO blocked");
    assert!(
        matches!(result, Err(WorkspaceError::NotAFile { .. })),
        "{result:?}"
    );
}

/// Every file (not following links) under `dir` whose content is `content`.
fn files_holding(dir: &Path, content: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let file_type = entry.file_type().unwrap();
        if file_type.is_dir() {
            found.extend(files_holding(&entry.path(), content));
        } else if file_type.is_file()
            && std::fs::read_to_string(entry.path()).is_ok_and(|c| c == content)
        {
            found.push(entry.path());
        }
    }
    found
}

fn path_strategy(root: String) -> impl Strategy<Value = String> {
    let component = prop::sample::select(vec!["..", ".", "a", "b", "link", "new", "secret.txt"]);
    (
        prop::collection::vec(component, 1..7),
        prop::sample::select(vec!["", "/", "ROOT"]),
    )
        .prop_map(move |(components, prefix)| {
            let joined = components.join("/");
            match prefix {
                "ROOT" => format!("{root}/{joined}"),
                prefix => format!("{prefix}{joined}"),
            }
        })
}

#[test]
fn proptest_no_path_resolves_outside_the_root() {
    let fx = Fixture::new();
    // Links out of the root at several depths, one dangling, and one that stays inside.
    std::fs::create_dir_all(inside(&fx, "a/b")).unwrap();
    std::fs::create_dir_all(inside(&fx, "b")).unwrap();
    symlink(&fx.outside, inside(&fx, "link")).unwrap();
    symlink("../../outside", inside(&fx, "a/link")).unwrap();
    symlink("/", inside(&fx, "a/b/link")).unwrap();
    symlink("..", inside(&fx, "b/link")).unwrap();
    // A dangling link out: writing through it would create `outside/planted`.
    symlink("../../outside/planted", inside(&fx, "a/new")).unwrap();
    let ws = Workspace::open(&fx.root).unwrap();
    let base = fx.root.parent().unwrap().to_path_buf();

    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let case = std::cell::Cell::new(0u32);
    let (written, refused) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    runner
        .run(&path_strategy(fx.root.display().to_string()), |path| {
            case.set(case.get() + 1);
            let marker = format!("written by case {} at {path}", case.get());
            match ws.write(&path, &marker) {
                Ok(()) => {
                    written.set(written.get() + 1);
                    // What was written is beneath the root, judged two ways: the
                    // canonical path of the location, and a scan of the whole temp dir.
                    let rel = ws.relative(&path).unwrap();
                    let canonical = std::fs::canonicalize(fx.root.join(&rel)).unwrap();
                    prop_assert!(canonical.starts_with(&fx.root), "{path} -> {canonical:?}");
                    let holders = files_holding(&base, &marker);
                    prop_assert!(!holders.is_empty(), "{path}: write vanished");
                    for holder in holders {
                        prop_assert!(holder.starts_with(&fx.root), "{path} -> {holder:?}");
                    }
                }
                Err(err) => {
                    if matches!(err, WorkspaceError::OutsideWorkspace { .. }) {
                        refused.set(refused.get() + 1);
                    }
                    prop_assert!(!err.to_string().is_empty());
                }
            }
            match ws.read_to_string(&path) {
                Ok(text) => {
                    prop_assert!(text != SECRET, "{path} read the outside secret");
                    let rel = ws.relative(&path).unwrap();
                    let canonical = std::fs::canonicalize(fx.root.join(&rel)).unwrap();
                    prop_assert!(canonical.starts_with(&fx.root), "{path} -> {canonical:?}");
                }
                Err(err) => {
                    prop_assert!(!err.to_string().is_empty());
                }
            }
            if let Ok(real) = ws.real_path(&path) {
                prop_assert!(real.starts_with(&fx.root), "{path} -> {real:?}");
            }
            prop_assert_eq!(fx.outside_names(), vec!["secret.txt".to_owned()]);
            Ok(())
        })
        .unwrap();
    // The generator must reach both sides, or the property says nothing.
    assert!(
        written.get() > 20,
        "only {} writes succeeded",
        written.get()
    );
    assert!(
        refused.get() > 20,
        "only {} writes were refused",
        refused.get()
    );
    fx.assert_outside_untouched();
}
