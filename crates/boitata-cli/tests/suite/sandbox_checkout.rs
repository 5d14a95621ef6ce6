//! `checkout` through `boitata run`: a host repository path and a `file://` URL land in
//! the sandbox at the host's commit, and the host repository is not touched.

use std::path::Path;

use boitata_test_support::repo::TempRepo;

use super::sandbox_support::{assert_torn_down, daemon, events, Home};

/// HEAD, refs, status and every file under .git with size and mtime.
fn fingerprint(repo: &TempRepo) -> String {
    let mut lines = vec![
        repo.git(&["rev-parse", "HEAD"]),
        repo.git(&["for-each-ref"]),
        repo.git(&["--no-optional-locks", "status", "--porcelain"]),
    ];
    let mut stack = vec![repo.path().join(".git")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                lines.push(format!(
                    "{} {} {:?}",
                    entry.path().display(),
                    meta.len(),
                    meta.modified().ok()
                ));
            }
        }
    }
    lines.sort();
    lines.join("\n")
}

fn checkout_yaml(repo: &str) -> String {
    format!(
        r#"name: checkout
entry: box
nodes:
  box: {{ type: provision, image: "boitata-base:bookworm", network: none }}
  code: {{ type: checkout, container: "{{box}}", repo: "{repo}" }}
  log: {{ type: exec, container: "{{box}}", command: "cd /workspace && git log -1 --format=%H && cat src.txt" }}
edges:
  - {{ from: box, to: code }}
  - {{ from: code, when: success, to: log }}
"#
    )
}

fn check(home: &Home, repo: &TempRepo, source: &str) {
    let head = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let file = home.blueprint("checkout", &checkout_yaml(source));
    let output = home
        .boitata()
        .args(["run", "t", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{source}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{head}\nsecond\n"),
        "{source}"
    );
    let json = home
        .boitata()
        .args(["run", "t", "--json", "--blueprint"])
        .arg(&file)
        .output()
        .unwrap();
    let events = events(&json.stdout);
    assert_torn_down(&events);
}

#[test]
fn checkout_of_a_host_path_and_a_file_url_shows_the_same_commit_and_leaves_the_host_repo_alone() {
    let Some(_daemon) = daemon("cli_sandbox_checkout") else {
        return;
    };
    let repo = TempRepo::with_files(&[("src.txt", "first\n")]);
    std::fs::write(repo.path().join("src.txt"), "second\n").unwrap();
    repo.git(&["commit", "--quiet", "-am", "second"]);
    // Uncommitted work in the host repository stays there (and out of the sandbox).
    std::fs::write(repo.path().join("src.txt"), "uncommitted\n").unwrap();
    let before = fingerprint(&repo);

    let home = Home::new();
    check(&home, &repo, &repo.path().display().to_string());
    check(&home, &repo, &format!("file://{}", repo.path().display()));
    assert_eq!(fingerprint(&repo), before, "the host repository changed");
    assert_eq!(
        std::fs::read_to_string(repo.path().join("src.txt")).unwrap(),
        "uncommitted\n"
    );
    assert!(!Path::new(&repo.path().join(".git/boitata")).exists());
}
