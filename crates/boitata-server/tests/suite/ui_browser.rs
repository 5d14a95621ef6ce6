//! The web UI in a real headless Chromium, driven through WebDriver: start a run from
//! the form, watch its events arrive, see its final status; the token prompt; cancel.
//!
//! Skipped (with a printed reason) when chromium or chromedriver is missing, except
//! under `CI=true`, where that fails.

use std::time::{Duration, Instant};

use boitata_core::RunStatus;
use boitata_test_support::browser::{self, ChromeDriver};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;

use super::support::{exec_blueprint, Setup};

const WAIT: Duration = Duration::from_secs(30);

async fn open(driver: &ChromeDriver) -> Client {
    ClientBuilder::new(HttpConnector::new())
        .capabilities(driver.capabilities())
        .connect(driver.url())
        .await
        .expect("cannot open a WebDriver session")
}

async fn find(client: &Client, css: &str) -> fantoccini::elements::Element {
    client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no element {css:?} within {WAIT:?}: {e}"))
}

/// Waits until the element's text contains `needle`; returns the text.
async fn wait_text(client: &Client, css: &str, needle: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(el) = client.find(Locator::Css(css)).await {
            if let Ok(text) = el.text().await {
                if text.contains(needle) {
                    return text;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "{css:?} never contained {needle:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn start_run_from_the_form(client: &Client, blueprint: &str, task: &str) -> String {
    find(client, &format!("#blueprint option[value='{blueprint}']")).await;
    find(client, "#blueprint")
        .await
        .select_by_value(blueprint)
        .await
        .unwrap();
    find(client, "#task").await.send_keys(task).await.unwrap();
    find(client, "#start-run").await.click().await.unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let url = client.current_url().await.unwrap();
        if let Some(id) = url.fragment().and_then(|f| f.strip_prefix("/runs/")) {
            return id.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the page never went to the run: {url}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_starts_a_run_and_shows_its_events_live_to_the_final_status() {
    let Some(driver) = browser::chromedriver("ui_starts_a_run") else {
        return;
    };
    let server = Setup::default()
        .blueprint(
            "greet.yaml",
            &exec_blueprint(
                "greet",
                "echo hello from boitata; sleep 2; echo 'a warning' >&2; sleep 1; echo goodbye",
            ),
        )
        .start()
        .await;
    let client = open(&driver).await;
    client.goto(&server.url).await.unwrap();

    let id = start_run_from_the_form(&client, "greet", "say hello from the browser").await;
    // The first output shows while the run is still going.
    wait_text(&client, "pre.console", "hello from boitata").await;
    let status = find(&client, "#run-status").await;
    assert_eq!(
        status.attr("data-status").await.unwrap().as_deref(),
        Some("running")
    );
    find(&client, "#steps li.running[data-node='step']").await;

    // Then the rest, and the final status.
    find(&client, "#run-status[data-status='succeeded']").await;
    let console = wait_text(&client, "pre.console", "goodbye").await;
    assert!(console.contains("a warning"), "{console}");
    find(&client, "pre.console .stderr").await;
    find(&client, "#steps li.succeeded[data-node='step']").await;
    wait_text(&client, "#run-finished", "Run succeeded").await;
    wait_text(&client, "#run-task", "say hello from the browser").await;
    assert_eq!(server.run_status(&id).await, RunStatus::Succeeded);

    // The runs list shows it.
    client.goto(&format!("{}/#/", server.url)).await.unwrap();
    let row = find(&client, &format!("tr.run-row[data-id='{id}']")).await;
    let text = row.text().await.unwrap();
    assert!(
        text.contains("succeeded") && text.contains("say hello from the browser"),
        "{text}"
    );
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_configured_the_page_asks_for_it_and_then_works() {
    let Some(driver) = browser::chromedriver("ui_asks_for_the_token") else {
        return;
    };
    let token = "browser-test-token-5f0c2a";
    let server = Setup::default().token(token).start().await;
    let client = open(&driver).await;
    client.goto(&server.url).await.unwrap();

    // Asked at once, since the first API call answered 401.
    find(&client, "#token-dialog[open]").await;
    let error = find(&client, "#token-error").await;
    assert!(!error.is_displayed().await.unwrap());
    find(&client, "#token-input")
        .await
        .send_keys("not-the-token")
        .await
        .unwrap();
    find(&client, "#token-form button[type=submit]")
        .await
        .click()
        .await
        .unwrap();
    // A wrong one is refused, and it asks again saying so.
    let deadline = Instant::now() + WAIT;
    while !find(&client, "#token-error")
        .await
        .is_displayed()
        .await
        .unwrap()
    {
        assert!(
            Instant::now() < deadline,
            "a refused token should be reported"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    find(&client, "#token-dialog[open]").await;
    find(&client, "#token-input")
        .await
        .send_keys(token)
        .await
        .unwrap();
    find(&client, "#token-form button[type=submit]")
        .await
        .click()
        .await
        .unwrap();

    // Now the data loads, and a run streams through the token-guarded SSE.
    let id = start_run_from_the_form(&client, "hello", "greet with a token").await;
    wait_text(&client, "pre.console", "world").await;
    find(&client, "#run-status[data-status='succeeded']").await;
    assert_eq!(server.run_status(&id).await, RunStatus::Succeeded);
    let stored: Option<String> = client
        .execute("return sessionStorage.getItem('boitata.api-token')", vec![])
        .await
        .unwrap()
        .as_str()
        .map(str::to_owned);
    assert_eq!(stored.as_deref(), Some(token));
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cancel_button_cancels_a_running_run() {
    let Some(driver) = browser::chromedriver("ui_cancels_a_run") else {
        return;
    };
    let server = Setup::default()
        .blueprint(
            "long.yaml",
            &exec_blueprint("long", "echo waiting; sleep 1000.6161"),
        )
        .start()
        .await;
    let client = open(&driver).await;
    client.goto(&server.url).await.unwrap();
    let id = start_run_from_the_form(&client, "long", "wait for a while").await;
    wait_text(&client, "pre.console", "waiting").await;
    find(&client, "#cancel-run").await.click().await.unwrap();
    find(&client, "#run-status[data-status='cancelled']").await;
    wait_text(&client, "#run-finished", "Run cancelled").await;
    assert_eq!(server.run_status(&id).await, RunStatus::Cancelled);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bidi_controls_in_output_and_task_are_shown_as_visible_marks() {
    let Some(driver) = browser::chromedriver("ui_bidi") else {
        return;
    };
    let server = Setup::default()
        .blueprint(
            "bidi.yaml",
            &exec_blueprint(
                "bidi",
                r"printf 'safe\342\200\256txt.exe gnp\342\200\254 ok\n'",
            ),
        )
        .start()
        .await;
    let client = open(&driver).await;
    client.goto(&server.url).await.unwrap();
    let id = start_run_from_the_form(&client, "bidi", "task \u{2066}here").await;
    find(&client, "#run-status[data-status='succeeded']").await;
    let console = wait_text(&client, "pre.console", "safe<U+202E>txt.exe gnp<U+202C> ok").await;
    assert!(!console.contains('\u{202e}'), "{console:?}");
    let task = wait_text(&client, "#run-task", "task <U+2066>here").await;
    assert!(!task.contains('\u{2066}'), "{task:?}");
    assert_eq!(server.run_status(&id).await, RunStatus::Succeeded);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_of_the_agent_that_exits_non_zero_is_marked_with_its_exit_code() {
    let Some(driver) = browser::chromedriver("ui_tool_exit") else {
        return;
    };
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("exit3.json");
    std::fs::write(
        &script,
        r#"{"turns": [
            {"tool_calls": [{"name": "execute_command", "arguments": {"command": "echo no; exit 3"}}]},
            {"tool_calls": [{"name": "execute_command", "arguments": {"command": "echo yes"}}]},
            {"text": "done"}
        ]}"#,
    )
    .unwrap();
    let agent = "name: agentic\nentry: work\nnodes:\n  work:\n    type: agent\n    prompt: \"{task}\"\nedges:\n  - { from: work, to: END }\n";
    let server = Setup::default()
        .blueprint("agentic.yaml", agent)
        .env("BOITATA_PROVIDER", "scripted")
        .env("BOITATA_SCRIPT", script.to_str().unwrap())
        .start()
        .await;
    let client = open(&driver).await;
    client.goto(&server.url).await.unwrap();
    let id = start_run_from_the_form(&client, "agentic", "run two commands").await;
    find(&client, "#run-status[data-status='succeeded']").await;
    let failed = wait_text(&client, "details.tool .tool-state.warn", "exit 3").await;
    assert!(failed.starts_with("⚠ exit 3 ("), "{failed:?}");
    let passed = wait_text(&client, "details.tool .tool-state.ok", "chars").await;
    assert!(passed.starts_with('✓'), "{passed:?}");
    assert_eq!(server.run_status(&id).await, RunStatus::Succeeded);
    client.close().await.unwrap();
}
