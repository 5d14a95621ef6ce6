//! `boitata run TASK --blueprint FILE_OR_NAME`, `boitata blueprint validate FILE...`
//! and `boitata blueprint graph FILE`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;

use boitata_blueprint::{
    load, Diagnostics, LoadError, NodeType, RunRequest, RuntimeSource, Validated,
};
use boitata_core::config::ProcessEnv;
use boitata_core::store::NewRun;
use boitata_core::RunStatus;
use miette::{GraphicalReportHandler, GraphicalTheme};

use crate::args::{BlueprintGraphArgs, BlueprintValidateArgs, GlobalArgs, RunArgs};
use crate::error::{CliError, EXIT_FAILED, EXIT_USAGE};
use crate::session::{self, LocalRun};

/// Draws diagnostics for stderr: colours on a terminal, plain otherwise.
fn render(diagnostics: &Diagnostics) -> String {
    let theme = if std::io::stderr().is_terminal() {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme).with_links(false);
    diagnostics.render_with(&handler)
}

/// Prints drawn diagnostics (their colours kept) with bidirectional controls in the
/// blueprint's source lines made visible.
fn eprint(text: &str) {
    let _ = write!(std::io::stderr(), "{}", crate::terminal::visible_bidi(text));
}

/// How to print a valid blueprint's warnings.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Warnings {
    /// Each drawn with its source line (`boitata blueprint validate`, `graph`).
    Drawn,
    /// One `file:line:col: warning: …` line each (before a run).
    OneLine,
}

/// Loads `path`, printing its warnings; an unreadable or invalid file is the error
/// message (diagnostics drawn in full).
fn load_reporting(path: &Path, warnings: Warnings) -> Result<Validated, String> {
    match load(path) {
        Ok(validated) => {
            if validated.warnings.is_empty() {
                return Ok(validated);
            }
            match warnings {
                Warnings::Drawn => eprint(&render(&validated.warnings)),
                Warnings::OneLine => {
                    for warning in validated.warnings.warnings() {
                        eprint(&format!("{}\n", warning.one_line()));
                    }
                }
            }
            Ok(validated)
        }
        Err(LoadError::Invalid(diagnostics)) => {
            eprint(&render(&diagnostics));
            let errors = diagnostics.errors().count();
            Err(format!(
                "{}: invalid blueprint ({})",
                path.display(),
                count(errors, "error", "errors")
            ))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// `1 node`, `2 nodes`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `boitata blueprint validate FILE...`: 0 when every file is valid, 1 otherwise.
pub(crate) fn validate(args: &BlueprintValidateArgs) -> u8 {
    let mut code = 0;
    for file in &args.files {
        match load_reporting(file, Warnings::Drawn) {
            Ok(validated) => {
                let _ = writeln!(
                    std::io::stdout(),
                    "{}: ok (blueprint {}, {}, {})",
                    file.display(),
                    validated.blueprint.name,
                    count(validated.blueprint.nodes.len(), "node", "nodes"),
                    count(validated.blueprint.edges.len(), "edge", "edges"),
                );
            }
            Err(message) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "error: {}",
                    crate::terminal::visible_bidi(&message)
                );
                code = EXIT_FAILED;
            }
        }
    }
    code
}

/// `boitata blueprint graph FILE`: the Mermaid flowchart on stdout.
pub(crate) fn graph(args: &BlueprintGraphArgs) -> Result<u8, CliError> {
    let validated = load_reporting(&args.file, Warnings::Drawn).map_err(CliError::failed)?;
    let _ = write!(
        std::io::stdout(),
        "{}",
        boitata_blueprint::graph::mermaid(&validated.blueprint)
    );
    Ok(0)
}

/// `boitata run TASK --blueprint FILE_OR_NAME [--param k=v]...`.
pub(crate) async fn run(global: &GlobalArgs, args: RunArgs) -> Result<u8, CliError> {
    let name_or_path = args.blueprint.clone().unwrap_or_default();
    let config = session::run_config(global, &args)?;
    let workspace = session::workspace_dir(&args)?;
    if !workspace.is_dir() {
        return Err(CliError::usage(format!(
            "workspace {} is not a directory",
            workspace.display()
        )));
    }

    let path = boitata_blueprint::find(
        &name_or_path,
        &boitata_blueprint::load::default_search_dirs(),
    )
    .map_err(CliError::usage)?;
    let blueprint = load_reporting(&path, Warnings::OneLine)
        .map_err(CliError::usage)?
        .blueprint;

    // Refuse before a run is recorded, with every reason at once: a param set twice,
    // params missing or not declared, sandbox nodes without a backend, a sandbox
    // blueprint without a reachable daemon.
    let mut problems: Vec<String> = boitata_blueprint::params::repeated(&args.params)
        .into_iter()
        .map(|(name, times)| format!("--param {name} is given {times} times: give each param once"))
        .collect();
    let params: BTreeMap<String, String> = args.params.iter().cloned().collect();
    let sandboxed = crate::sandbox::SandboxedExecutor::from_env();
    let executor = &sandboxed.executor;
    if let Err(e) = executor.check_run(&blueprint, &params) {
        problems.extend(e.problems.iter().map(ToString::to_string));
    }
    let runtime = RuntimeSource::Config {
        config: config.clone(),
        env: Arc::new(ProcessEnv),
    };
    if let Err(problem) = boitata_blueprint::check_provider(&blueprint, &runtime) {
        problems.push(problem.to_string());
    }
    let mut code = EXIT_USAGE;
    if let Err(e) = sandboxed.preflight(&blueprint).await {
        if problems.is_empty() {
            code = e.code;
        }
        problems.push(e.message);
    }
    match problems.as_slice() {
        [] => {}
        [problem] => return Err(CliError::new(code, problem)),
        _ => {
            let mut message = format!(
                "blueprint {:?} cannot run ({}):",
                blueprint.name,
                count(problems.len(), "problem", "problems")
            );
            for problem in &problems {
                message.push_str("\n  - ");
                message.push_str(problem);
            }
            return Err(CliError::new(code, message));
        }
    }

    // A host `agent` node is the in-process agent, with its commands on this machine.
    if blueprint
        .nodes
        .iter()
        .any(|node| node.node_type() == NodeType::Agent)
    {
        session::warn_if_root();
    }
    let store = session::open_store(&config)?;
    let local = LocalRun::start(
        store,
        NewRun {
            blueprint: Some(blueprint.name.clone()),
            task: args.task.clone(),
            params: params
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
            workspace: Some(workspace.display().to_string()),
            ..NewRun::default()
        },
        args.json,
    )?;
    let request = RunRequest {
        task: args.task.clone(),
        params,
        workspace,
        runtime,
        emitter: local.emitter.clone(),
        cancel: local.cancel.clone(),
    };
    match executor.run(&blueprint, request).await {
        Ok(report) => {
            if report.status == RunStatus::Succeeded {
                if let Some(output) = &report.last_output {
                    local.print_result(output);
                }
            }
            Ok(local.close(report.status))
        }
        // Checked above; should it happen anyway, the run is still closed in the store.
        Err(e) => Ok(local.finish(RunStatus::Failed, Some(e.to_string()))),
    }
}
