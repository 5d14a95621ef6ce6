//! What every local run shares: loading the config, opening the run store, the
//! emitter with its printer, and Ctrl-C / SIGTERM / SIGHUP turning into cancellation.

use std::io::Write;
use std::sync::Arc;

use boitata_core::config::{Config, ProcessEnv, ProviderKind};
use boitata_core::store::{NewRun, RunEmitters, RunStore, SqliteStore};
use boitata_core::{Emitter, EventPayload, RunStatus};
use tokio_util::sync::CancellationToken;

use crate::args::{GlobalArgs, RunArgs};
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
    } else if script.is_some() {
        // A script only makes sense for the scripted provider.
        config.provider.kind = ProviderKind::Scripted;
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

/// Opens the run store in the configured data dir, redacting with the config's
/// redactor.
pub(crate) fn open_store(config: &Config) -> Result<Arc<dyn RunStore>, CliError> {
    let store = SqliteStore::open(&config.data_dir_or_default(), config.redactor())
        .map_err(CliError::usage)?;
    Ok(Arc::new(store))
}

/// Opens the run store only if it exists (for read-only commands).
pub(crate) fn open_existing_store(config: &Config) -> Result<Option<Arc<dyn RunStore>>, CliError> {
    let path = config
        .data_dir_or_default()
        .join(boitata_core::store::DB_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let store = SqliteStore::open_file(&path, config.redactor()).map_err(CliError::usage)?;
    Ok(Some(Arc::new(store)))
}

/// Says once on stderr that the run's in-process agent runs as root, if it does: its
/// commands can then read every process's environment, keys included.
pub(crate) fn warn_if_root() {
    if let Some(warning) = root_warning(boitata_tools::process::running_as_root()) {
        let _ = writeln!(std::io::stderr(), "{warning}");
    }
}

/// The warning a run started as root prints once on stderr, if `is_root`.
fn root_warning(is_root: bool) -> Option<&'static str> {
    is_root.then_some(
        "warning: boitata runs as root: the agent's commands run as root on this machine and can \
         read any process's memory and environment (secrets are masked in what the model sees, \
         not kept from the commands); run it as an ordinary user, or in a sandbox (--blueprint)",
    )
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
        store: Arc<dyn RunStore>,
        mut new: NewRun,
        json: bool,
    ) -> Result<LocalRun, CliError> {
        new.owner_pid = Some(std::process::id());
        let record = store.create_run(&new).map_err(CliError::usage)?;
        let emitter = store.emitter(record.id);
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
            let _ = writeln!(
                std::io::stderr(),
                "error: {}",
                crate::terminal::safe(&e.to_string())
            );
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

/// First Ctrl-C, SIGTERM or SIGHUP: cancel the run (it then ends cleanly as
/// `cancelled`, exit 130). Second one: exit 130 at once.
fn watch_signals(cancel: CancellationToken, renderer: Arc<Renderer>) {
    tokio::spawn(cancel_on_signals(
        cancel,
        renderer,
        "cancelling: finishing the current step and cleaning up (press Ctrl-C again to quit at once)",
    ));
}

/// Waits for Ctrl-C, SIGTERM or SIGHUP (the terminal closed: without this the default
/// action kills the process with no teardown, leaving sandboxes up and the run
/// `running`): the first prints `note` and fires `cancel`; the second exits the
/// process with 130 at once.
pub(crate) async fn cancel_on_signals(
    cancel: CancellationToken,
    renderer: Arc<Renderer>,
    note: &'static str,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut hangup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    let mut seen = 0;
    loop {
        tokio::select! {
            r = tokio::signal::ctrl_c() => { if r.is_err() { return; } }
            _ = term.recv() => {}
            _ = hangup.recv() => {}
        }
        seen += 1;
        if seen == 1 {
            renderer.note(note);
            cancel.cancel();
        } else {
            std::process::exit(130);
        }
    }
}

/// The config for a local `boitata run`: the files and environment, then the run's
/// `--provider`, `--model`, `--script`, `--stream` and `--max-turns`.
pub(crate) fn run_config(global: &GlobalArgs, args: &RunArgs) -> Result<Config, CliError> {
    let mut config = load_config(global)?;
    override_provider(
        &mut config,
        args.provider.as_deref(),
        args.model.as_deref(),
        args.script.as_deref(),
    )?;
    if let Some(max_turns) = args.max_turns {
        config.agent.max_turns = max_turns;
    }
    if let Some(stream) = args.stream {
        config.provider.stream = stream;
    }
    // A checked-out repository's ./boitata.toml may not choose where the key goes.
    config.check_key_destination().map_err(CliError::usage)?;
    Ok(config)
}

/// `--workspace`, or the current directory.
pub(crate) fn workspace_dir(args: &RunArgs) -> Result<std::path::PathBuf, CliError> {
    match &args.workspace {
        Some(dir) => Ok(dir.clone()),
        None => std::env::current_dir()
            .map_err(|e| CliError::usage(format!("cannot read the current directory: {e}"))),
    }
}
