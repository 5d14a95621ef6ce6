//! `agent`: the in-process agent, working on the host workspace.

use async_trait::async_trait;
use boitata_core::agent::AgentStop;
use boitata_tools::workspace::Workspace;

use crate::model::{Node, NodeSpec};
use crate::node::{NodeContext, NodeError, NodeHandler, NodeOutcome};

/// Runs `agent` nodes: the agent built by the run's
/// [`Runtime`](boitata_core::runtime::Runtime) (built on first use, so a blueprint
/// without agent nodes needs no API key), prompted with the node's `prompt`, limited to
/// its `max_turns` (default: the config's `agent.max_turns`, which `--max-turns` sets;
/// the node's own wins). Output: the agent's final message; outcome: success iff it
/// ended its turn (running out of turns is a failure, with the reason as its error).
/// Its model requests are charged to the run's budget ([`NodeContext::budget`]); a
/// spent budget fails the node, and so the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostAgent;

#[async_trait]
impl NodeHandler for HostAgent {
    async fn run(&self, node: &Node, ctx: &NodeContext) -> Result<NodeOutcome, NodeError> {
        let NodeSpec::Agent(spec) = &node.spec else {
            return Err(NodeError::Invalid(format!(
                "node {:?}: the host agent cannot run a {} node",
                node.id,
                node.node_type()
            )));
        };
        let runtime = ctx.runtime()?;
        let workspace = Workspace::open(ctx.workspace()).map_err(NodeError::other)?;
        let mut agent = runtime.agent().with_budget(ctx.budget().clone());
        if let Some(max_turns) = spec.max_turns {
            agent = agent.with_max_turns(max_turns);
        }
        let outcome = agent
            .run(
                &spec.prompt,
                &workspace,
                ctx.emitter(),
                Some(ctx.node_id()),
                ctx.cancel(),
            )
            .await?;
        Ok(match outcome.stop {
            AgentStop::EndTurn => NodeOutcome::success(outcome.final_message),
            AgentStop::MaxTurns => {
                let raise = if spec.max_turns.is_some() {
                    "raise max_turns on the node"
                } else {
                    "set max_turns on the node, or raise agent.max_turns or --max-turns"
                };
                let used = match outcome.turns {
                    1 => "its only turn".to_owned(),
                    n => format!("all {n} turns"),
                };
                NodeOutcome::failure(outcome.final_message)
                    .with_error(format!("the agent used {used} without finishing ({raise})"))
            }
            AgentStop::Cancelled => NodeOutcome::failure(outcome.final_message),
        })
    }
}
