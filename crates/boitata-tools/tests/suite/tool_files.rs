//! `file_read`, `file_write`, `file_edit`, `list_dir`, and the toolbox around them.

use std::os::unix::fs::symlink;

use boitata_tools::tool::{ToolError, Toolbox};
use serde_json::json;

use super::tool_support::{inside, Fixture};

#[tokio::test]
async fn file_edit_replaces_the_one_match() {
    let fx = Fixture::new();
    std::fs::write(inside(&fx, "lib.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    let out = fx
        .call(
            "file_edit",
            json!({"path": "lib.rs", "old_string": "fn b() {}", "new_string": "fn c() {}"}),
        )
        .await
        .unwrap();
    assert!(out.contains("replaced 1 occurrence"), "{out}");
    assert_eq!(
        std::fs::read_to_string(inside(&fx, "lib.rs")).unwrap(),
        "fn a() {}\nfn c() {}\n"
    );
}

#[tokio::test]
async fn file_edit_with_no_match_fails_and_changes_nothing() {
    let fx = Fixture::new();
    std::fs::write(inside(&fx, "lib.rs"), "fn a() {}\n").unwrap();
    let err = fx
        .call(
            "file_edit",
            json!({"path": "lib.rs", "old_string": "fn z() {}", "new_string": "x"}),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not found in lib.rs"), "{err}");
    assert_eq!(
        std::fs::read_to_string(inside(&fx, "lib.rs")).unwrap(),
        "fn a() {}\n"
    );
}

#[tokio::test]
async fn file_edit_with_several_matches_fails_giving_the_count() {
    let fx = Fixture::new();
    let text = "let x = 1;\nlet x = 1;\nlet x = 1;\n";
    std::fs::write(inside(&fx, "main.rs"), text).unwrap();
    let err = fx
        .call(
            "file_edit",
            json!({"path": "main.rs", "old_string": "let x = 1;", "new_string": "let y = 2;"}),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("occurs 3 times in main.rs"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(inside(&fx, "main.rs")).unwrap(),
        text
    );
}

#[tokio::test]
async fn file_read_returns_a_line_range_and_says_where_to_continue() {
    let fx = Fixture::new();
    let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    std::fs::write(inside(&fx, "ten.txt"), text.as_str()).unwrap();
    let whole = fx
        .call("file_read", json!({"path": "ten.txt"}))
        .await
        .unwrap();
    assert_eq!(whole, text);
    let range = fx
        .call(
            "file_read",
            json!({"path": "ten.txt", "offset": 3, "limit": 2}),
        )
        .await
        .unwrap();
    assert_eq!(
        range,
        "line 3\nline 4\n[... 6 more lines; continue with offset=5 ...]"
    );
    let past = fx
        .call("file_read", json!({"path": "ten.txt", "offset": 11}))
        .await
        .unwrap_err();
    assert!(past.to_string().contains("has 10 lines"), "{past}");
}

#[tokio::test]
async fn file_read_output_is_capped_with_the_cut_byte_count() {
    let mut fx = Fixture::new();
    fx.ctx.limits.max_output_bytes = 100;
    // 50 lines of 10 bytes: 10 lines fit in 100 bytes, 400 bytes are cut.
    let text: String = (0..50).map(|n| format!("{n:09}\n")).collect();
    std::fs::write(inside(&fx, "long.txt"), text.as_str()).unwrap();
    let out = fx
        .call("file_read", json!({"path": "long.txt"}))
        .await
        .unwrap();
    assert_eq!(
        out,
        format!(
            "{}[... 400 bytes cut at the output limit; continue with offset=11 ...]",
            &text[..100]
        )
    );
}

#[tokio::test]
async fn file_read_refuses_binary_files() {
    let fx = Fixture::new();
    std::fs::write(inside(&fx, "blob.bin"), b"\x7fELF\x00\x01\x02").unwrap();
    let err = fx
        .call("file_read", json!({"path": "blob.bin"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("binary file"), "{err}");
}

#[tokio::test]
async fn file_write_creates_and_then_replaces() {
    let fx = Fixture::new();
    let first = fx
        .call("file_write", json!({"path": "n/new.txt", "content": "one"}))
        .await
        .unwrap();
    assert_eq!(first, "created n/new.txt (3 bytes)");
    let second = fx
        .call(
            "file_write",
            json!({"path": "n/new.txt", "content": "two!"}),
        )
        .await
        .unwrap();
    assert_eq!(second, "replaced n/new.txt (4 bytes)");
    assert_eq!(
        std::fs::read_to_string(inside(&fx, "n/new.txt")).unwrap(),
        "two!"
    );
}

#[tokio::test]
async fn list_dir_is_sorted_and_marks_directories_and_links() {
    let fx = Fixture::new();
    std::fs::create_dir(inside(&fx, "src")).unwrap();
    std::fs::write(inside(&fx, "b.txt"), "").unwrap();
    std::fs::write(inside(&fx, "a.txt"), "").unwrap();
    std::fs::write(inside(&fx, ".hidden"), "").unwrap();
    symlink("/", inside(&fx, "root_link")).unwrap();
    std::fs::write(inside(&fx, "src/main.rs"), "").unwrap();
    let out = fx.call("list_dir", json!({})).await.unwrap();
    assert_eq!(out, ".hidden\na.txt\nb.txt\nroot_link -> /\nsrc/\n");
    let sub = fx.call("list_dir", json!({"path": "src"})).await.unwrap();
    assert_eq!(sub, "main.rs\n");
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_are_errors_not_panics() {
    let fx = Fixture::new();
    let missing = fx.call("file_read", json!({})).await.unwrap_err();
    assert!(
        matches!(&missing, ToolError::InvalidArguments { tool, message }
            if tool == "file_read" && message.contains("path")),
        "{missing}"
    );
    let extra = fx
        .call("file_read", json!({"path": "x", "bogus": 1}))
        .await
        .unwrap_err();
    assert!(
        matches!(extra, ToolError::InvalidArguments { .. }),
        "{extra}"
    );
    let wrong_type = fx
        .call("file_write", json!({"path": 3, "content": "x"}))
        .await
        .unwrap_err();
    assert!(matches!(wrong_type, ToolError::InvalidArguments { .. }));
    let unknown = fx.call("rm_rf", json!({})).await.unwrap_err();
    assert!(
        unknown.to_string().contains("file_read, file_write"),
        "{unknown}"
    );
}

#[test]
fn every_tool_has_a_described_strict_schema() {
    let specs = Toolbox::standard().specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "file_read",
            "file_write",
            "file_edit",
            "list_dir",
            "search",
            "execute_command",
            "git_status",
            "git_diff",
            "git_log",
            "git_commit"
        ]
    );
    for spec in &specs {
        assert!(spec.description.len() > 40, "{}: no description", spec.name);
        assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
        assert_eq!(
            spec.parameters["additionalProperties"], false,
            "{}",
            spec.name
        );
        let properties = spec.parameters["properties"].as_object().unwrap();
        for (name, property) in properties {
            assert!(
                property["description"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty()),
                "{}.{name}: no description",
                spec.name
            );
        }
        for required in spec.parameters["required"].as_array().into_iter().flatten() {
            assert!(properties.contains_key(required.as_str().unwrap()));
        }
    }
}
