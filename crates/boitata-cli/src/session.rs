//! What every local run shares: loading the config, opening the run store, the
//! emitter with its printer, and Ctrl-C / SIGTERM turning into cancellation.

use std::io::Write;
use std::sync::Arc;

use boitata_core::config::{Config, ProcessEnv, ProviderKind};
use boitata_core::store::{NewRun, RunStore};
use boitata_core::{Emitter, EventPayload, Redactor, RunStatus};
use tokio_util::sync::CancellationToken;

use crate::args::GlobalArgs;
use crate::error::CliError;
use crate::render::Renderer;

/// Loads the config named by the global options (and the environment).
pub(crate) fn load_config(global: &GlobalArgs) -> Result<Config, CliError> {
    let mut config =
        Config::load(global.config.as_deref(), &ProcessEnv).map_err(CliError::usage)?;
    if let Some(dir) = &global.data_dir {
        config.data_dir = Some(dir.clone());
    }
    Ok(config)
}

/// Applies `--provider`, `--model` and `--script` on top of the config.
pub(crate) fn override_provider(
    config: &mut Config,
    provider: Option<&str>,
    model: Option<&str>,
    script: Option<&std::path::Path>,
) -> Result<(), CliError> {
    if let Some(kind) = provider {
        config.provider.kind = ProviderKind::parse(kind).map_err(CliError::usage)?;
    }
    if let Some(model) = model {
        config.provider.model = Some(model.to_owned());
    }
    if let Some(script) = script {
        config.provider.script = Some(script.to_path_buf());
    }
    config.refresh_api_key(&ProcessEnv);
    Ok(())
}

/// Opens the run store in the configured data dir.
pub(crate) fn open_store(config: &Config) -> Result<Arc<RunStore>, CliError> {
    RunStore::open(&config.data_dir_or_default())
        .map(Arc::new)
        .map_err(CliError::usage)
}

/// A run in progress in this process.
pub(crate) struct LocalRun {
    pub(crate) emitter: Emitter,
    pub(crate) cancel: CancellationToken,
    renderer: Arc<Renderer>,
}

impl LocalRun {
    /// Records a new run, wires the emitter (store first, then the printer) and starts
    /// watching for Ctrl-C and SIGTERM.
    pub(crate) fn start(
        store: Arc<RunStore>,
        mut new: NewRun,
        json: bool,
        redactor: Redactor,
    ) -> Result<LocalRun, CliError> {
        new.owner_pid = Some(std::process::id());
        let record = store.create_run(&new).map_err(CliError::usage)?;
        let emitter = Emitter::new(record.id, Some(store), redactor);
        let renderer = Arc::new(Renderer::new(json));
        emitter.observe(renderer.clone());
        let cancel = CancellationToken::new();
        watch_signals(cancel.clone(), renderer.clone());
        Ok(LocalRun {
            emitter,
            cancel,
            renderer,
        })
    }

    /// Emits `run_finished` and returns the exit code for `status`.
    pub(crate) fn finish(&self, status: RunStatus, error: Option<String>) -> u8 {
        // A cancel that arrived after the work ended does not change the outcome.
        if let Err(e) = self
            .emitter
            .emit(None, EventPayload::RunFinished { status, error })
        {
            let _ = writeln!(std::io::stderr(), "error: {e}");
        }
        self.renderer.finish();
        status.exit_code() as u8
    }

    /// For a run whose `run_finished` was emitted by the blueprint executor: stops the
    /// spinner and returns the exit code for `status`.
    pub(crate) fn close(&self, status: RunStatus) -> u8 {
        self.renderer.finish();
        status.exit_code() as u8
    }

    /// Prints `text` on stdout unless in `--json` mode.
    pub(crate) fn print_result(&self, text: &str) {
        self.renderer.print_result(text);
    }
}

/// First Ctrl-C or SIGTERM: cancel the run (it then ends cleanly as `cancelled`).
/// Second Ctrl-C: exit 130 at once.
fn watch_signals(cancel: CancellationToken, renderer: Arc<Renderer>) {
    tokio::spawn(async move {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        let mut seen = 0;
        loop {
            tokio::select! {
                r = tokio::signal::ctrl_c() => { if r.is_err() { return; } }
                _ = term.recv() => {}
            }
            seen += 1;
            if seen == 1 {
                renderer.note("cancelling: finishing the current step and cleaning up (press Ctrl-C again to quit at once)");
                cancel.cancel();
            } else {
                std::process::exit(130);
            }
        }
    });
}
