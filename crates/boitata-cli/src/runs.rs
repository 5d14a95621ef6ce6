//! `boitata runs list` and `boitata runs show ID`.

use std::io::Write;

use std::sync::Arc;

use boitata_core::store::{RunEmitters, RunRecord, RunStore, StoreError};
use boitata_core::{Event, EventPayload, RunStatus};
use boitata_protocol::api::RunView;

use crate::args::{GlobalArgs, RunsListArgs, RunsShowArgs};
use crate::error::CliError;
use crate::render::Renderer;
use crate::session;
use crate::terminal::safe;

pub(crate) fn list(global: &GlobalArgs, args: RunsListArgs) -> Result<u8, CliError> {
    let config = session::load_config(global)?;
    // A read command does not create a store that is not there.
    let runs = match session::open_existing_store(&config)? {
        Some(store) => store
            .list_runs(args.limit as usize)
            .map_err(CliError::failed)?
            .into_iter()
            .map(RunView::from)
            .collect(),
        None => Vec::new(),
    };
    print_list(&runs, args.json)
}

/// Prints runs as a table, or as a JSON array (the API's shape, locally as remotely).
pub(crate) fn print_list(runs: &[RunView], json: bool) -> Result<u8, CliError> {
    let mut out = std::io::stdout().lock();
    if json {
        let text = serde_json::to_string_pretty(&runs).map_err(CliError::failed)?;
        let _ = writeln!(out, "{text}");
        return Ok(0);
    }
    if runs.is_empty() {
        let _ = writeln!(out, "no runs yet (start one with `boitata run TASK`)");
        return Ok(0);
    }
    let _ = writeln!(
        out,
        "{:<36}  {:<9}  {:<20}  {:<22}  TASK",
        "ID", "STATUS", "CREATED", "BLUEPRINT"
    );
    for run in runs {
        let _ = writeln!(
            out,
            "{:<36}  {:<9}  {:<20}  {:<22}  {}",
            run.id,
            run.status.as_str(),
            run.created_at.format("%Y-%m-%d %H:%M:%S"),
            safe(run.blueprint.as_deref().unwrap_or("-")),
            safe(&one_line(&run.task, 60)),
        );
    }
    Ok(0)
}

pub(crate) fn show(global: &GlobalArgs, args: RunsShowArgs) -> Result<u8, CliError> {
    let config = session::load_config(global)?;
    let Some(store) = session::open_existing_store(&config)? else {
        return Err(CliError::failed(StoreError::NotFound(args.id)));
    };
    let run = store.find_run(&args.id).map_err(CliError::failed)?;
    let events = store.events(&run.id, 0).map_err(CliError::failed)?;
    let workspace = run.workspace.clone();
    print_show(
        &RunView::from(run),
        workspace.as_deref(),
        &events,
        args.json,
    )
}

/// Prints a run's header and its events (as `runs show` does), or both as JSON.
/// `workspace` is the run's host workspace, known for local runs only.
pub(crate) fn print_show(
    run: &RunView,
    workspace: Option<&str>,
    events: &[Event],
    json: bool,
) -> Result<u8, CliError> {
    if json {
        let value = serde_json::json!({ "run": run, "events": events });
        let text = serde_json::to_string_pretty(&value).map_err(CliError::failed)?;
        let _ = writeln!(std::io::stdout().lock(), "{text}");
        return Ok(0);
    }
    print_header(run, workspace);
    let renderer = Renderer::to_stdout();
    for event in events {
        boitata_core::EventSink::accept(&renderer, event).map_err(CliError::failed)?;
    }
    Ok(0)
}

fn print_header(run: &RunView, workspace: Option<&str>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "run       {}", run.id);
    let _ = writeln!(out, "status    {}", run.status);
    if let Some(b) = &run.blueprint {
        let _ = writeln!(out, "blueprint {}", safe(b));
    }
    let _ = writeln!(out, "task      {}", safe(&one_line(&run.task, 200)));
    if let Some(w) = workspace {
        let _ = writeln!(out, "workspace {}", safe(w));
    }
    let _ = writeln!(out, "created   {}", run.created_at.to_rfc3339());
    if let Some(f) = run.finished_at {
        let _ = writeln!(out, "finished  {}", f.to_rfc3339());
    }
    if let Some(e) = &run.error {
        let _ = writeln!(out, "error     {}", safe(e));
    }
    let _ = writeln!(out);
}

fn one_line(text: &str, max_chars: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(max_chars).collect();
    if line.chars().count() > max_chars || text.lines().count() > 1 {
        out.push('…');
    }
    out
}

/// Runs the store says are live whose owner process has ended (a SIGKILL, a crash,
/// a power cut): each gets a `run_finished` event, failed (interrupted), so it stops
/// looking `running` forever. Returns the runs it marked.
pub(crate) fn mark_interrupted_runs(store: &Arc<dyn RunStore>) -> Result<Vec<RunRecord>, CliError> {
    let mut marked = Vec::new();
    for run in store.live_runs().map_err(CliError::failed)? {
        let Some(pid) = run.owner_pid else { continue };
        if !run.owner_gone() {
            continue;
        }
        let emitter = store.resuming_emitter(&run.id).map_err(CliError::failed)?;
        emitter
            .emit(
                None,
                EventPayload::RunFinished {
                    status: RunStatus::Failed,
                    error: Some(format!(
                        "interrupted: the process that ran it (pid {pid}) ended before the run finished"
                    )),
                },
            )
            .map_err(CliError::failed)?;
        marked.push(run);
    }
    Ok(marked)
}
