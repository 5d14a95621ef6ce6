//! A real headless browser for UI tests: Debian's `chromium`, driven through
//! WebDriver by `chromedriver` (package `chromium-driver`).
//!
//! ```no_run
//! use boitata_test_support::browser;
//!
//! let Some(driver) = browser::chromedriver("ui_starts_a_run") else { return };
//! // connect a WebDriver client (e.g. fantoccini) to driver.url() with
//! // driver.capabilities(), then drive the page.
//! # let _ = driver;
//! ```
//!
//! Without `chromium` or `chromedriver`, [`chromedriver`] prints why the test is
//! skipped and returns `None`; when the environment says `CI=true` it panics instead:
//! CI must not skip browser tests (`scripts/test.sh` installs both packages).

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::free_port;

/// A running `chromedriver`, killed on drop.
#[derive(Debug)]
pub struct ChromeDriver {
    child: Child,
    url: String,
    chromium: PathBuf,
    _profile: tempfile::TempDir,
}

/// Finds `name` on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Whether this run is CI (`CI=true`), where a missing browser is a failure.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Starts `chromedriver` on a free port, or explains why not: `None` (after printing
/// the reason) when chromium or chromedriver is missing, outside CI.
///
/// # Panics
/// Under `CI=true` when either is missing; when chromedriver does not answer in 30 s.
pub fn chromedriver(test: &str) -> Option<ChromeDriver> {
    let chromium = which("chromium").or_else(|| which("chromium-browser"));
    let driver = which("chromedriver");
    let (Some(chromium), Some(driver)) = (chromium, driver) else {
        let reason =
            "chromium and chromedriver are needed (apt-get install chromium chromium-driver)";
        assert!(
            !in_ci(),
            "{test}: {reason}; CI=true, so this is a failure, not a skip"
        );
        println!("skipping {test}: {reason}");
        return None;
    };
    let port = free_port();
    // Its own process group, so the browsers it starts go with it on drop.
    let child = Command::new(&driver)
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver.display()));
    let mut driver = ChromeDriver {
        child,
        url: format!("http://127.0.0.1:{port}"),
        chromium,
        _profile: tempfile::tempdir().unwrap(),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = driver.child.try_wait().unwrap() {
            panic!("chromedriver exited ({status}) before listening on port {port}");
        }
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen within 30s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(driver)
}

impl ChromeDriver {
    /// The WebDriver endpoint, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// New-session capabilities for headless Chromium (no sandbox: tests run as root
    /// in containers; a fresh profile; a fixed window size).
    pub fn capabilities(&self) -> serde_json::Map<String, serde_json::Value> {
        let options = serde_json::json!({
            "binary": self.chromium,
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--window-size=1280,1000",
                format!("--user-data-dir={}", self._profile.path().display()),
            ],
        });
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), "chrome".into());
        caps.insert("goog:chromeOptions".into(), options);
        caps
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
