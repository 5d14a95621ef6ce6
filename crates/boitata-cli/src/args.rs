//! Command-line arguments.

use std::path::PathBuf;

use boitata_core::config::StreamMode;
use clap::{Args, Parser, Subcommand};

/// Run LLM coding agents on real repositories, safely.
#[derive(Debug, Parser)]
#[command(name = "boitata", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub(crate) struct GlobalArgs {
    /// Config file (default: $BOITATA_CONFIG, ./boitata.toml, then ~/.config/boitata/config.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Where runs are stored (default: $BOITATA_DATA_DIR, then ~/.local/share/boitata).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a task: the in-process agent on a workspace, or a blueprint (--blueprint).
    Run(RunArgs),
    /// Inspect stored runs.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Check blueprints and draw their graphs.
    Blueprint {
        #[command(subcommand)]
        command: BlueprintCommand,
    },
    /// List Boitata's sandboxes, and remove those whose run is gone (with their run networks and host rules).
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SandboxCommand {
    /// List Boitata's sandboxes (containers) and whether their run is live.
    List(SandboxListArgs),
    /// Remove every sandbox whose run is no longer live (after a crash or a SIGKILL), then those runs' networks and host rules.
    Gc(SandboxGcArgs),
}

#[derive(Debug, Args)]
pub(crate) struct SandboxListArgs {
    /// Print a JSON array.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct SandboxGcArgs {
    /// Only say what would be removed.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BlueprintCommand {
    /// Validate blueprint files: exit 0 when all are valid, 1 otherwise (diagnostics on stderr).
    Validate(BlueprintValidateArgs),
    /// Print a blueprint's graph as a Mermaid flowchart.
    Graph(BlueprintGraphArgs),
}

#[derive(Debug, Args)]
pub(crate) struct BlueprintValidateArgs {
    /// The blueprint files.
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct BlueprintGraphArgs {
    /// The blueprint file.
    #[arg(value_name = "FILE")]
    pub(crate) file: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// What the agent should do (`{task}` in a blueprint).
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub(crate) task: String,
    /// The workspace the agent works in (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,
    /// Model provider: openai, anthropic or scripted (overrides config and BOITATA_PROVIDER).
    #[arg(long, value_name = "PROVIDER")]
    pub(crate) provider: Option<String>,
    /// Model name (overrides config and BOITATA_MODEL).
    #[arg(long, value_name = "MODEL")]
    pub(crate) model: Option<String>,
    /// For the scripted provider: the script file (overrides config and BOITATA_SCRIPT).
    #[arg(long, value_name = "FILE")]
    pub(crate) script: Option<PathBuf>,
    /// Ask the model server for streamed answers: true, false or auto (overrides
    /// provider.stream and BOITATA_STREAM; auto, the default, falls back to whole
    /// answers when a server refuses to stream with tools).
    #[arg(long, value_name = "true|false|auto", value_parser = parse_stream)]
    pub(crate) stream: Option<StreamMode>,
    /// The most model requests the agent may make (overrides agent.max_turns). In a
    /// blueprint it applies to agent nodes without their own max_turns: a node's
    /// max_turns wins.
    #[arg(long, value_name = "N")]
    pub(crate) max_turns: Option<u32>,
    /// Print one JSON event per line on stdout instead of human progress.
    #[arg(long)]
    pub(crate) json: bool,
    /// Run a blueprint: a file path, or a name looked up as ./blueprints/NAME.yaml, then
    /// in the user config dir's blueprints/.
    #[arg(long, short = 'b', value_name = "FILE_OR_NAME")]
    pub(crate) blueprint: Option<String>,
    /// Set a blueprint param (repeatable; each param once). Needs --blueprint.
    #[arg(long = "param", short = 'p', value_name = "NAME=VALUE", value_parser = parse_param)]
    pub(crate) params: Vec<(String, String)>,
    /// Run on a boitata-server instead (`--blueprint` is then a name the server offers).
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

/// Where a remote server is, and its token.
#[derive(Debug, Args)]
pub(crate) struct RemoteArgs {
    /// Use the boitata-server at this URL (e.g. http://127.0.0.1:8420) instead of this machine.
    #[arg(long, value_name = "URL")]
    pub(crate) remote: Option<String>,
    /// The server's API token (default: $BOITATA_API_TOKEN; prefer the variable: arguments show in `ps`).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "BOITATA_API_TOKEN",
        hide_env_values = true
    )]
    pub(crate) token: Option<String>,
}

fn parse_stream(text: &str) -> Result<StreamMode, String> {
    StreamMode::parse(text).map_err(|e| e.to_string())
}

fn parse_param(text: &str) -> Result<(String, String), String> {
    boitata_blueprint::params::parse_assignment(text)
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// List recent runs, newest first.
    List(RunsListArgs),
    /// Show one run and its events.
    Show(RunsShowArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RunsListArgs {
    /// How many runs to list.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) limit: u32,
    /// Print a JSON array of runs.
    #[arg(long)]
    pub(crate) json: bool,
    /// List a boitata-server's runs instead of this machine's.
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

#[derive(Debug, Args)]
pub(crate) struct RunsShowArgs {
    /// The run id (or a unique prefix of it).
    pub(crate) id: String,
    /// Print `{"run": …, "events": […]}` as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Show a run of a boitata-server instead of this machine's.
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}
