//! `boitata run TASK`: the in-process agent on a host workspace.

use boitata_core::agent::AgentStop;
use boitata_core::config::ProcessEnv;
use boitata_core::runtime::Runtime;
use boitata_core::store::NewRun;
use boitata_core::{EventPayload, RunStatus};
use boitata_tools::workspace::Workspace;

use crate::args::{GlobalArgs, RunArgs};
use crate::error::CliError;
use crate::session::{self, LocalRun};

pub(crate) async fn run(global: &GlobalArgs, args: RunArgs) -> Result<u8, CliError> {
    if !args.params.is_empty() {
        return Err(CliError::usage(
            "--param needs --blueprint: params are a blueprint's inputs; without \
             --blueprint the agent runs on the task alone",
        ));
    }
    let config = session::run_config(global, &args)?;
    let workspace_dir = session::workspace_dir(&args)?;
    let workspace = Workspace::open(&workspace_dir).map_err(CliError::usage)?;
    let runtime = Runtime::from_config(config, &ProcessEnv).map_err(CliError::usage)?;
    session::warn_if_root();
    let store = session::open_store(runtime.config())?;
    let workspace_text = workspace.root().display().to_string();
    let local = LocalRun::start(
        store,
        NewRun {
            task: args.task.clone(),
            workspace: Some(workspace_text.clone()),
            ..NewRun::default()
        },
        args.json,
    )?;
    let provider = runtime.provider();
    local
        .emitter
        .emit(
            None,
            EventPayload::RunStarted {
                task: args.task.clone(),
                blueprint: None,
                workspace: Some(workspace_text),
                provider: Some(provider.name().to_owned()),
                model: Some(provider.model().to_owned()),
            },
        )
        .map_err(CliError::failed)?;
    let agent = runtime.agent();
    let outcome = agent
        .run(&args.task, &workspace, &local.emitter, None, &local.cancel)
        .await;
    let (status, error) = match outcome {
        Ok(outcome) => match outcome.stop {
            AgentStop::EndTurn => {
                local.print_result(&outcome.final_message);
                (RunStatus::Succeeded, None)
            }
            AgentStop::Cancelled => (RunStatus::Cancelled, Some("cancelled by signal".to_owned())),
            AgentStop::MaxTurns => (
                RunStatus::Failed,
                Some(format!(
                    "the agent used all {} turns without finishing (raise --max-turns or agent.max_turns)",
                    outcome.turns
                )),
            ),
        },
        Err(e) => (RunStatus::Failed, Some(e.to_string())),
    };
    Ok(local.finish(status, error))
}
