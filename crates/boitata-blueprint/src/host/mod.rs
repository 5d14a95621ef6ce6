//! The node handlers that run on the host: [`HostExec`] (`exec` without `container`)
//! and [`HostAgent`] (`agent`). [`NodeHandlers::host`](crate::NodeHandlers::host)
//! registers both.

mod agent;
mod exec;

pub use agent::HostAgent;
pub use exec::{HostExec, DEFAULT_PATH, EXEC_OUTPUT_TAIL_BYTES};
