//! The agent's tools and the confinement they act under.
//!
//! It owns:
//! - [`tool`]: the [`Tool`](tool::Tool) trait, the built-in tools (`file_read`,
//!   `file_write`, `file_edit`, `list_dir`, `search`, `execute_command`, `git_*`) and the
//!   [`Toolbox`](tool::Toolbox) that dispatches a model's call by name;
//! - [`workspace`]: the [`Workspace`](workspace::Workspace) root every path is resolved
//!   beneath (`cap-std`, `openat2(RESOLVE_BENEATH)`): no `..`, absolute path or symlink
//!   escapes it;
//! - [`process`]: child processes with an explicit environment, a deadline, an output
//!   cap, and no way to outlive the call; and the one reader of `/proc/PID/stat`
//!   ([`ProcStat`](process::ProcStat)) that tells whether a run's owner still lives.
//!
//! It does not own the agent loop that decides which tool to call (`boitata-core`), the
//! model APIs (`boitata-provider`) or sandboxes (`boitata-orchestrator`).
//!
//! # Example
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use boitata_tools::tool::{ToolContext, ToolLimits, Toolbox};
//! use boitata_tools::workspace::Workspace;
//!
//! let ctx = ToolContext {
//!     workspace: Workspace::open("/tmp/project")?,
//!     cancel: tokio_util::sync::CancellationToken::new(),
//!     command_env: [("PATH".to_owned(), "/usr/bin:/bin".to_owned())].into(),
//!     limits: ToolLimits::default(),
//! };
//! let toolbox = Toolbox::standard();
//! let listing = toolbox
//!     .call(&ctx, "list_dir", serde_json::json!({ "path": "." }))
//!     .await?;
//! println!("{listing}");
//! # Ok(())
//! # }
//! ```

pub mod process;
pub mod tool;
pub mod workspace;
