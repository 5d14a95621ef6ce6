//! The node handlers that run on the host: [`HostExec`] (`exec` without `container`)
//! and [`HostAgent`] (`agent`). [`NodeHandlers::host`](crate::NodeHandlers::host)
//! registers both. [`ExecOutputBuffer`] is how they, and the sandboxed handlers,
//! relay a command's output.

mod agent;
mod exec;
mod output;

pub use agent::HostAgent;
pub use exec::{HostExec, DEFAULT_PATH, EXEC_OUTPUT_TAIL_BYTES};
pub use output::{ExecOutputBuffer, EXEC_OUTPUT_LINE_HOLD_BYTES};
