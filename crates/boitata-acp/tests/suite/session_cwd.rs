//! A session's `cwd` must be the workspace root or beneath it, by path components.

use serde_json::Value;

use super::support::{RawClient, TestAgent};

async fn session_error(client: &mut RawClient, cwd: &std::path::Path) -> Value {
    let response = client.new_session(cwd).await;
    assert_eq!(response["error"]["code"], -32602, "cwd {cwd:?}: {response}");
    response["error"]["message"].clone()
}

#[tokio::test]
async fn session_cwd_must_stay_within_the_workspace_root() {
    let agent = TestAgent::start(vec![], None).await;
    let root = agent.root();
    std::fs::create_dir(root.join("sub")).unwrap();
    // A sibling whose name starts with the root's: a string-prefix check would let it in.
    let evil = root.with_file_name(format!(
        "{}-evil",
        root.file_name().unwrap().to_string_lossy()
    ));
    std::fs::create_dir(&evil).unwrap();
    std::os::unix::fs::symlink(&evil, root.join("link-out")).unwrap();

    let mut client = RawClient::connect(agent.addr).await;
    client.initialize(None).await;
    for ok in [root.clone(), root.join("sub"), root.join("sub/..")] {
        let response = client.new_session(&ok).await;
        assert!(
            response["result"]["sessionId"].is_string(),
            "cwd {ok:?}: {response}"
        );
    }
    let message = session_error(&mut client, &evil).await;
    assert!(
        message
            .as_str()
            .unwrap()
            .contains("outside the workspace root"),
        "{message}"
    );
    session_error(
        &mut client,
        &root.join("../").join(evil.file_name().unwrap()),
    )
    .await;
    session_error(&mut client, &root.join("link-out")).await;
    session_error(&mut client, std::path::Path::new("/")).await;
    session_error(&mut client, &root.join("missing")).await;
    let message = session_error(&mut client, std::path::Path::new("relative/dir")).await;
    assert!(
        message.as_str().unwrap().contains("not absolute"),
        "{message}"
    );
    std::fs::remove_dir_all(&evil).unwrap();
}
