//! `search`: regex over the tree, respecting .gitignore, capped.

// Set-up helpers: a failed set-up is a failed test.
#![allow(clippy::unwrap_used)]

use boitata_tools::tool::ToolError;
use serde_json::json;

use super::tool_support::{inside, Fixture};

fn write(fx: &Fixture, path: &str, text: &str) {
    let path = inside(fx, path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[tokio::test]
async fn search_respects_gitignore() {
    let fx = Fixture::new();
    write(&fx, ".gitignore", "ignored.txt\nbuild/\n");
    write(&fx, "keep.txt", "nothing\nneedle here\n");
    write(&fx, "ignored.txt", "needle ignored\n");
    write(&fx, "build/out.txt", "needle built\n");
    write(&fx, "src/deep/mod.rs", "// needle deep\n");
    let out = fx
        .call("search", json!({"pattern": "needle"}))
        .await
        .unwrap();
    assert_eq!(
        out,
        "keep.txt:2: needle here\nsrc/deep/mod.rs:1: // needle deep\n"
    );
}

#[tokio::test]
async fn search_skips_the_git_directory_and_binary_files() {
    let fx = Fixture::new();
    write(&fx, ".git/config", "needle in git\n");
    std::fs::write(inside(&fx, "blob.bin"), b"needle\x00\x01").unwrap();
    write(&fx, ".config/settings", "needle hidden\n");
    let out = fx
        .call("search", json!({"pattern": "needle"}))
        .await
        .unwrap();
    assert_eq!(out, ".config/settings:1: needle hidden\n");
}

#[tokio::test]
async fn search_narrows_by_path_and_glob() {
    let fx = Fixture::new();
    write(&fx, "a/x.rs", "fn needle() {}\n");
    write(&fx, "a/x.md", "needle docs\n");
    write(&fx, "b/y.rs", "needle b\n");
    let by_glob = fx
        .call("search", json!({"pattern": "needle", "glob": "*.rs"}))
        .await
        .unwrap();
    assert_eq!(by_glob, "a/x.rs:1: fn needle() {}\nb/y.rs:1: needle b\n");
    let by_path = fx
        .call("search", json!({"pattern": "needle", "path": "a"}))
        .await
        .unwrap();
    assert_eq!(by_path, "a/x.md:1: needle docs\na/x.rs:1: fn needle() {}\n");
    let none = fx
        .call("search", json!({"pattern": "absent"}))
        .await
        .unwrap();
    assert_eq!(none, "no matches for \"absent\"");
}

#[tokio::test]
async fn search_output_is_capped_with_a_count() {
    let mut fx = Fixture::new();
    fx.ctx.limits.max_output_bytes = 200;
    let text: String = (0..100).map(|n| format!("hit {n:03}\n")).collect();
    write(&fx, "many.txt", &text);
    let out = fx.call("search", json!({"pattern": "^hit"})).await.unwrap();
    // Each line is `many.txt:N: hit NNN\n`; lines 1-9 are 20 bytes, the rest 21-22.
    assert!(out.starts_with("many.txt:1: hit 000\n"), "{out}");
    let marker = out.lines().last().unwrap();
    assert!(marker.contains("bytes cut at the output limit"), "{out}");
    let shown = out.lines().count() - 1;
    assert!(
        marker.contains(&format!("{} of 100 matching lines not shown", 100 - shown)),
        "{out}"
    );
}

#[tokio::test]
async fn a_bad_pattern_is_an_argument_error() {
    let fx = Fixture::new();
    let err = fx
        .call("search", json!({"pattern": "("}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
}
