//! Blueprints are named, never addressed by path; the directory is validated at start.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::support::{exec_blueprint, write_file, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_and_unknown_names_are_refused_and_nothing_outside_is_read() {
    let server = Setup::default().start().await;
    // Valid blueprints outside the trusted directory, reachable by the paths below
    // if the server ever resolved names as paths. Each would leave a marker.
    let outside = server.dir.path();
    let marker = outside.join("escaped");
    let escape = exec_blueprint("x", &format!("touch {}", marker.display()));
    write_file(&outside.join("x.yaml"), &escape);
    write_file(&outside.join("x"), &escape);
    write_file(&outside.join("a/b"), &escape);
    write_file(&outside.join("a/b.yaml"), &escape);

    let absolute = outside.join("x.yaml").display().to_string();
    let cases: Vec<(&str, StatusCode)> = vec![
        ("../x", StatusCode::BAD_REQUEST),
        ("../x.yaml", StatusCode::BAD_REQUEST),
        ("a/b", StatusCode::BAD_REQUEST),
        ("%2e%2e", StatusCode::BAD_REQUEST),
        ("%2e%2e%2fx", StatusCode::BAD_REQUEST),
        ("..", StatusCode::BAD_REQUEST),
        (absolute.as_str(), StatusCode::BAD_REQUEST),
        ("hello.yaml", StatusCode::BAD_REQUEST),
        ("HELLO", StatusCode::BAD_REQUEST),
        ("", StatusCode::BAD_REQUEST),
        ("x", StatusCode::NOT_FOUND),
        ("no-such-blueprint", StatusCode::NOT_FOUND),
    ];
    for (name, expected) in cases {
        let response = server
            .request(Method::POST, "/api/runs")
            .json(&serde_json::json!({"blueprint": name, "task": "escape"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), expected, "blueprint {name:?}");
        let body: Value = response.json().await.unwrap();
        let error = body["error"].as_str().unwrap();
        if expected == StatusCode::NOT_FOUND {
            assert!(
                error.contains("no blueprint named") && error.contains("offered: hello"),
                "{error}"
            );
        } else {
            assert!(error.contains("never a path"), "{error}");
        }
    }
    // Nothing ran: no run recorded, no marker.
    let runs = server.get_json("/api/runs").await;
    assert_eq!(runs, serde_json::json!([]));
    assert!(!marker.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_blueprints_are_reported_and_not_offered_and_the_server_still_starts() {
    let server = Setup::default()
        .blueprint("broken.yaml", "name: broken\nentry: nowhere\nnodes: {}\n")
        .blueprint("typo.yaml", &exec_blueprint("typo", "true").replace("command", "comand"))
        .blueprint("zz-again.yml", &exec_blueprint("hello", "echo a second hello"))
        .blueprint("notes.txt", "not a blueprint")
        .blueprint(
            "params.yaml",
            "name: with-params\nentry: s\nparams:\n  who:\n    description: whom to greet\n  how:\n    default: warmly\nnodes:\n  s: { type: exec, command: \"echo {params.how} {params.who}\" }\n",
        )
        .start()
        .await;
    let offered = server.get_json("/api/blueprints").await;
    let names: Vec<&str> = offered
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hello", "with-params"]);
    let rejected: Vec<String> = server
        .rejected
        .iter()
        .map(|r| r.file.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(rejected, ["broken.yaml", "typo.yaml", "zz-again.yml"]);
    let typo = &server.rejected[1].reason;
    assert!(
        typo.contains("typo.yaml:") && typo.contains("comand"),
        "{typo}"
    );
    assert!(server.rejected[2].reason.contains("already taken"));

    // Params are described, and checked before a run is recorded.
    let params = &offered[1]["params"];
    assert_eq!(params[0]["name"], "how");
    assert_eq!(params[0]["required"], false);
    assert_eq!(params[1]["name"], "who");
    assert_eq!(params[1]["required"], true);
    assert_eq!(offered[1]["nodes"][0]["type"], "exec");
    let response = server
        .request(Method::POST, "/api/runs")
        .json(&serde_json::json!({"blueprint": "with-params", "task": "greet"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("\"who\" is required"),
        "{body}"
    );
    assert_eq!(server.get_json("/api/runs").await, serde_json::json!([]));

    let response = server
        .request(Method::POST, "/api/runs")
        .json(&serde_json::json!({"blueprint": "with-params", "task": "greet", "params": {"who": "you", "how": 3}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let run: Value = response.json().await.unwrap();
    assert_eq!(run["params"]["how"], "3");
    let events = server.events(run["id"].as_str().unwrap(), None).await;
    assert!(events.iter().any(|(_, e)| matches!(
        &e.payload,
        boitata_core::EventPayload::ExecOutput { chunk, .. } if chunk == "3 you\n"
    )));
}
