//! `exec` with `container`: `sh -c COMMAND` inside a sandbox of the run.
//! Output: the tail of stdout; outcome: success iff exit code 0 (edges may route on the
//! code).
//!
//! The command runs in `workdir` (an absolute path inside the sandbox; default: the
//! sandbox's working directory) with the sandbox's environment
//! plus `BOITATA_RUN_ID`, `BOITATA_NODE` and the node's `env` (never the host's).
//! stdout and stderr are streamed as `exec_output` events. When the node is cancelled
//! or its `timeout` passes, every process the command started is killed inside the
//! sandbox.

use async_trait::async_trait;
use boitata_blueprint::{Node, NodeContext, NodeError, NodeHandler, NodeOutcome, NodeSpec};

use super::output::EventOutput;
use super::SandboxNodes;
use crate::sandbox::{ExecSpec, ExecStatus};

/// The in-container `exec` handler.
#[derive(Debug, Clone)]
pub struct SandboxExec {
    nodes: SandboxNodes,
}

impl SandboxExec {
    /// A handler running commands in the sandboxes of `nodes`.
    pub fn new(nodes: SandboxNodes) -> Self {
        SandboxExec { nodes }
    }
}

#[async_trait]
impl NodeHandler for SandboxExec {
    async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
        let NodeSpec::Exec(fields) = &node.spec else {
            return Err(NodeError::Invalid(format!(
                "node {:?}: the sandbox exec handler cannot run a {} node",
                node.id,
                node.node_type()
            )));
        };
        let Some(container) = &fields.container else {
            return Err(NodeError::Invalid(format!(
                "node {:?}: exec without container runs on the host, not in a sandbox",
                node.id
            )));
        };
        let id = self.nodes.sandbox_of_run(ctx, container)?;
        let workdir = fields
            .workdir
            .as_deref()
            .map(str::trim)
            .filter(|dir| !dir.is_empty());
        if let Some(dir) = workdir {
            if !dir.starts_with('/') {
                return Err(NodeError::Invalid(format!(
                    "node {:?}: workdir {dir:?} is not an absolute path inside the sandbox; \
                     write it like /workspace/src",
                    node.id
                )));
            }
        }
        let mut spec = ExecSpec::shell(fields.command.clone())
            .env("BOITATA_RUN_ID", ctx.run_id())
            .env("BOITATA_NODE", ctx.node_id())
            .cancel_on(ctx.cancel().clone());
        spec.env
            .extend(node.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(dir) = workdir {
            spec = spec.workdir(dir);
        }

        let mut output = EventOutput::new(ctx.emitter().clone(), ctx.node_id());
        let status = self.nodes.backend().exec(&id, &spec, &mut output).await;
        let (stdout, _stderr) = output.finish();
        match status.map_err(NodeError::other)? {
            ExecStatus::Exited(code) => Ok(NodeOutcome::from_exit_code(code, stdout)),
            // Stopped (run cancelled or node timed out): the partial output, failed.
            ExecStatus::Cancelled | ExecStatus::TimedOut(_) => Ok(NodeOutcome::failure(stdout)),
            ExecStatus::Detached => Ok(NodeOutcome::success(stdout)),
        }
    }
}
