use std::time::Duration;

use boitata_orchestrator::sandbox::{
    LABEL_CREATED_BY, LABEL_HOST, LABEL_NODE, LABEL_PID, LABEL_RUN_ID,
};
use boitata_orchestrator::{
    archive, CollectOutput, DockerBackend, ExecSpec, ExecStatus, Network, Sandbox, SandboxError,
    SandboxId,
};

use super::{base_spec, provision, setup};

async fn run(
    backend: &DockerBackend,
    id: &SandboxId,
    spec: ExecSpec,
) -> (ExecStatus, CollectOutput) {
    let mut out = CollectOutput::default();
    let status = backend
        .exec(id, &spec, &mut out)
        .await
        .unwrap_or_else(|e| panic!("exec {:?}: {e}", spec.argv));
    (status, out)
}

#[tokio::test]
async fn provision_exec_destroy_captures_output_and_exit_codes() {
    let Some((daemon, scope, backend)) = setup("provision_exec_destroy") else {
        return;
    };
    let id = provision(&backend, &base_spec(&scope)).await;
    assert!(daemon.container_exists(id.as_str()));

    let (status, out) = run(
        &backend,
        &id,
        ExecSpec::shell("echo hello; echo oops >&2; pwd"),
    )
    .await;
    assert_eq!(status, ExecStatus::Exited(0));
    assert_eq!(out.stdout_text(), "hello\n/workspace\n");
    assert_eq!(out.stderr_text(), "oops\n");

    let (status, _) = run(&backend, &id, ExecSpec::shell("exit 3")).await;
    assert_eq!(status, ExecStatus::Exited(3));
    assert_eq!(status.code(), Some(3));
    assert!(!status.success());

    let (status, out) = run(
        &backend,
        &id,
        ExecSpec::new(["sh", "-c", "echo \"$GREETING from $(pwd)\""])
            .workdir("/tmp")
            .env("GREETING", "hi there"),
    )
    .await;
    assert_eq!(status, ExecStatus::Exited(0));
    assert_eq!(out.stdout_text(), "hi there from /tmp\n");

    // A command that reads stdin gets end-of-file at once, not a hang.
    let (status, out) = run(
        &backend,
        &id,
        ExecSpec::shell("cat; read line; echo after-read").timeout(Duration::from_secs(20)),
    )
    .await;
    assert_eq!(status, ExecStatus::Exited(0), "stdin was not closed");
    assert_eq!(out.stdout_text(), "after-read\n");

    // A program that does not exist is an error or exit 126/127, never a hang.
    let mut sink = CollectOutput::default();
    match backend
        .exec(&id, &ExecSpec::new(["/no/such/program"]), &mut sink)
        .await
    {
        Ok(ExecStatus::Exited(code)) => assert!(code == 126 || code == 127, "{code}"),
        Ok(other) => panic!("{other:?}"),
        Err(e) => assert!(!e.to_string().is_empty()),
    }

    backend.destroy(&id).await.unwrap();
    assert!(!daemon.container_exists(id.as_str()));
    // Idempotent.
    backend.destroy(&id).await.unwrap();
    backend
        .destroy(&SandboxId::new("0123456789ab-not-a-container"))
        .await
        .unwrap();
    assert!(scope.containers().is_empty());

    let err = backend
        .exec(&id, &ExecSpec::shell("true"), &mut CollectOutput::default())
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn hardening_is_visible_in_inspect_while_running() {
    let Some((daemon, scope, backend)) = setup("hardening_defaults") else {
        return;
    };
    let id = provision(&backend, &base_spec(&scope)).await;
    let doc = daemon.inspect(id.as_str());
    let host = &doc["HostConfig"];
    assert_eq!(doc["State"]["Running"], true, "{doc:#}");
    assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]), "{host:#}");
    assert!(
        host["CapAdd"].is_null() || host["CapAdd"] == serde_json::json!([]),
        "{host:#}"
    );
    assert_eq!(
        host["SecurityOpt"],
        serde_json::json!(["no-new-privileges"]),
        "{host:#}"
    );
    assert_eq!(host["PidsLimit"], 512);
    assert_eq!(host["Memory"], 2_i64 * 1024 * 1024 * 1024);
    assert_eq!(
        host["MemorySwap"], host["Memory"],
        "swap beyond the memory limit"
    );
    assert!(host["NanoCpus"].as_i64().unwrap() > 0, "{host:#}");
    assert_eq!(host["Privileged"], false);
    assert_eq!(host["Init"], true);
    assert_eq!(host["NetworkMode"], "bridge");
    assert!(host["Binds"].is_null(), "{host:#}");
    assert_eq!(
        doc["Mounts"],
        serde_json::json!([]),
        "no mounts, no docker socket"
    );
    let labels = &doc["Config"]["Labels"];
    assert_eq!(labels[LABEL_CREATED_BY], "boitata");
    assert_eq!(labels[LABEL_RUN_ID], scope.run_id());
    assert_eq!(labels[LABEL_NODE], "test");
    assert_eq!(labels[LABEL_PID], std::process::id().to_string());
    assert!(labels[LABEL_HOST].as_str().is_some_and(|h| !h.is_empty()));

    // The limits hold inside, too: no capabilities at all, and no way to gain any.
    let (status, out) = run(
        &backend,
        &id,
        ExecSpec::shell("grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"),
    )
    .await;
    assert_eq!(status, ExecStatus::Exited(0), "{}", out.stderr_text());
    let text = out.stdout_text();
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
    assert!(text.contains("CapBnd:\t0000000000000000"), "{text}");
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    assert!(text.contains("512"), "{text}");
    // Without CAP_CHOWN even root cannot give a file away.
    let (status, _) = run(
        &backend,
        &id,
        ExecSpec::shell("touch /tmp/f && chown 1000 /tmp/f"),
    )
    .await;
    assert_ne!(status, ExecStatus::Exited(0));
}

#[tokio::test]
async fn overrides_change_the_limits_and_ports_publish_on_loopback_only() {
    let Some((daemon, scope, backend)) = setup("hardening_overrides") else {
        return;
    };
    let mut spec = base_spec(&scope).port(8080);
    spec.limits.pids = 64;
    spec.limits.memory_bytes = 256 * 1024 * 1024;
    spec.limits.cpus = 0.5;
    spec.hardening.cap_add = vec!["CHOWN".into()];
    spec.hardening.no_new_privileges = false;
    spec.env.insert("SANDBOX_ENV".into(), "from-spec".into());
    spec.workdir = "/srv/work".into();
    let id = provision(&backend, &spec).await;

    let doc = daemon.inspect(id.as_str());
    let host = &doc["HostConfig"];
    assert_eq!(host["PidsLimit"], 64);
    assert_eq!(host["Memory"], 256 * 1024 * 1024);
    assert_eq!(host["NanoCpus"], 500_000_000);
    assert_eq!(host["CapDrop"], serde_json::json!(["ALL"]));
    assert_eq!(host["CapAdd"], serde_json::json!(["CHOWN"]));
    assert!(
        host["SecurityOpt"].is_null() || host["SecurityOpt"] == serde_json::json!([]),
        "{host:#}"
    );
    assert_eq!(host["Privileged"], false);
    let bindings = &host["PortBindings"]["8080/tcp"];
    assert_eq!(bindings[0]["HostIp"], "127.0.0.1", "{host:#}");

    let addr = backend.endpoint(&id, 8080).await.unwrap();
    assert!(addr.ip().is_loopback(), "{addr}");
    let published = &doc["NetworkSettings"]["Ports"]["8080/tcp"][0];
    assert_eq!(published["HostIp"], "127.0.0.1", "{doc:#}");
    assert_eq!(
        published["HostPort"].as_str().unwrap(),
        addr.port().to_string()
    );
    let err = backend.endpoint(&id, 9999).await.unwrap_err();
    assert!(
        matches!(err, SandboxError::PortNotPublished { port: 9999, .. }),
        "{err}"
    );

    let (status, out) = run(&backend, &id, ExecSpec::shell("pwd; echo $SANDBOX_ENV")).await;
    assert_eq!(status, ExecStatus::Exited(0));
    assert_eq!(out.stdout_text(), "/srv/work\nfrom-spec\n");
    let (status, _) = run(
        &backend,
        &id,
        ExecSpec::shell("touch /tmp/f && chown 1000 /tmp/f"),
    )
    .await;
    assert_eq!(status, ExecStatus::Exited(0), "CHOWN was given back");
}

#[tokio::test]
async fn network_none_has_no_interfaces_but_loopback_and_cannot_publish() {
    let Some((daemon, scope, backend)) = setup("network_none") else {
        return;
    };
    let id = provision(&backend, &base_spec(&scope).network(Network::None)).await;
    assert_eq!(
        daemon.inspect(id.as_str())["HostConfig"]["NetworkMode"],
        "none"
    );
    let (_, out) = run(&backend, &id, ExecSpec::shell("ls /sys/class/net")).await;
    assert_eq!(
        out.stdout_text().split_whitespace().collect::<Vec<_>>(),
        vec!["lo"]
    );

    let err = backend
        .provision(&base_spec(&scope).network(Network::None).port(80))
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::InvalidSpec { .. }), "{err}");
    assert!(err.to_string().contains("use the run network"), "{err}");
}

#[tokio::test]
async fn upload_unpacks_files_and_creates_the_destination() {
    let Some((_daemon, scope, backend)) = setup("upload") else {
        return;
    };
    let id = provision(&backend, &base_spec(&scope)).await;

    let tar = archive::single_file("notes/hello.txt", b"hello from the host\n", 0o640).unwrap();
    backend.upload(&id, tar, "/opt/boitata/in").await.unwrap();
    let (status, out) = run(
        &backend,
        &id,
        ExecSpec::shell(
            "cat /opt/boitata/in/notes/hello.txt; stat -c '%a %u' /opt/boitata/in/notes/hello.txt",
        ),
    )
    .await;
    assert_eq!(status, ExecStatus::Exited(0), "{}", out.stderr_text());
    assert_eq!(out.stdout_text(), "hello from the host\n640 0\n");

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/main.txt"), "main").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("link")).unwrap();
    backend
        .upload(&id, archive::directory(dir.path()).unwrap(), "/workspace")
        .await
        .unwrap();
    let (_, out) = run(
        &backend,
        &id,
        ExecSpec::shell("cat src/main.txt; echo; readlink link"),
    )
    .await;
    assert_eq!(out.stdout_text(), "main\n/etc/hostname\n");

    let err = backend
        .upload(
            &SandboxId::new("boitata-no-such-container"),
            Vec::new(),
            "/x",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err}");
}

/// The processes of the container other than its init and keep-alive, as
/// `pid cmdline` lines.
async fn stray_processes(backend: &DockerBackend, id: &SandboxId) -> Vec<String> {
    let (_, out) = run(
        backend,
        id,
        ExecSpec::shell(
            "for d in /proc/[0-9]*; do p=${d#/proc/}; [ \"$p\" = $$ ] && continue; \
             c=$(tr '\\0' ' ' < $d/cmdline 2>/dev/null); [ -n \"$c\" ] && echo \"$p $c\"; done",
        ),
    )
    .await;
    out.stdout_text()
        .lines()
        .filter(|l| l.contains("sleep 30"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn exec_timeout_kills_every_process_it_started_inside_the_container() {
    let Some((_daemon, scope, backend)) = setup("exec_timeout") else {
        return;
    };
    let id = provision(&backend, &base_spec(&scope)).await;

    // A background child, one that left the session with setsid, one that holds the
    // output pipe open, and the foreground sleep.
    let mut out = CollectOutput::default();
    let spec = ExecSpec::shell(
        "sleep 301 & setsid sleep 302 & (sleep 303; echo never) & echo started; sleep 304",
    )
    .timeout(Duration::from_secs(2));
    let status = backend.exec(&id, &spec, &mut out).await.unwrap();
    assert_eq!(status, ExecStatus::TimedOut(Duration::from_secs(2)));
    assert_eq!(
        out.stdout_text(),
        "started\n",
        "output before the deadline is kept"
    );

    let left = stray_processes(&backend, &id).await;
    assert!(left.is_empty(), "processes left in the container: {left:?}");

    // The sandbox is still usable.
    let (status, out) = run(&backend, &id, ExecSpec::shell("echo still-here")).await;
    assert_eq!(status, ExecStatus::Exited(0));
    assert_eq!(out.stdout_text(), "still-here\n");
}

#[tokio::test]
async fn detached_exec_returns_at_once_and_keeps_running() {
    let Some((_daemon, scope, backend)) = setup("exec_detached") else {
        return;
    };
    let id = provision(&backend, &base_spec(&scope)).await;
    let status = backend
        .exec(
            &id,
            &ExecSpec::shell("echo up > /tmp/daemon.txt; sleep 305").detached(),
            &mut CollectOutput::default(),
        )
        .await
        .unwrap();
    assert_eq!(status, ExecStatus::Detached);
    assert!(status.success());
    let (status, out) = run(
        &backend,
        &id,
        ExecSpec::shell("for i in $(seq 50); do [ -s /tmp/daemon.txt ] && break; sleep 0.1; done; cat /tmp/daemon.txt"),
    )
    .await;
    assert_eq!(status, ExecStatus::Exited(0));
    assert_eq!(out.stdout_text(), "up\n");
    let left = stray_processes(&backend, &id).await;
    assert!(left.iter().any(|p| p.ends_with(" sleep 305 ")), "{left:?}");
}

#[tokio::test]
async fn a_missing_image_says_how_to_build_it() {
    let Some((_daemon, scope, backend)) = setup("missing_image") else {
        return;
    };
    let mut spec = base_spec(&scope);
    spec.image = "boitata-no-such-image:never".into();
    let err = backend.provision(&spec).await.unwrap_err();
    assert!(matches!(err, SandboxError::ImageNotFound { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("boitata-no-such-image:never"), "{text}");
    assert!(text.contains("scripts/build-base-image.sh"), "{text}");
    assert!(text.contains("docker build"), "{text}");
    assert!(scope.containers().is_empty());
}

#[tokio::test]
async fn a_missing_daemon_socket_is_one_clear_line() {
    // Needs no daemon: that is the point.
    let backend = DockerBackend::with_host("unix:///nonexistent/boitata-test/docker.sock");
    let spec = boitata_orchestrator::SandboxSpec::new("boitata-base:bookworm", "run-x");
    let err = backend.provision(&spec).await.unwrap_err();
    assert!(
        matches!(err, SandboxError::DaemonUnavailable { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(!text.contains('\n'), "{text}");
    assert!(
        text.contains("unix:///nonexistent/boitata-test/docker.sock"),
        "{text}"
    );
    assert!(text.contains("DOCKER_HOST"), "{text}");
    assert!(text.starts_with("cannot reach the Docker daemon"), "{text}");
    // Every operation says the same.
    let err = backend.destroy(&SandboxId::new("x")).await.unwrap_err();
    assert!(
        matches!(err, SandboxError::DaemonUnavailable { .. }),
        "{err:?}"
    );

    // A TCP address nobody listens on: refused, same error, quickly.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let backend = DockerBackend::with_host(format!("tcp://127.0.0.1:{port}"));
    let err = backend.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(err, SandboxError::DaemonUnavailable { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_sandbox_on_a_run_network_that_does_not_exist_says_who_makes_it() {
    let Some((_daemon, scope, backend)) = setup("run_network_missing") else {
        return;
    };
    let err = backend
        .provision(&base_spec(&scope).network(Network::Run))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "network boitata-run-{} does not exist",
            scope.run_id()
        )) && text.contains("RunSandboxes"),
        "{text}"
    );
    assert!(
        scope.containers().is_empty(),
        "the failed sandbox is removed"
    );
}
