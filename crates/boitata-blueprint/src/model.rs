//! The blueprint model: what a validated blueprint file says, as Rust types.
//!
//! A [`Blueprint`] is built by [`parse`](crate::parse) (which validates it); the
//! executor and the node handlers read it. Node ids, param names and the blueprint
//! name are plain strings; every string a node hands to a handler may hold
//! `{placeholders}` until the executor renders the node (see [`template`](crate::template)).
//!
//! The node-type structs ([`ProvisionSpec`], [`CheckoutSpec`], [`ExecSpec`],
//! [`AgentSandboxSpec`], [`AgentSpec`]) derive `Deserialize` with
//! `deny_unknown_fields`: their serde field lists are the allowed fields of each type.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use boitata_core::budget::Budget;
use serde::{Deserialize, Serialize};

/// The node id that ends the walk when an edge leads to it.
pub const END: &str = "END";

/// The default [`Blueprint::max_steps`].
pub const DEFAULT_MAX_STEPS: u32 = 100;

/// The default [`Node::max_visits`].
pub const DEFAULT_MAX_VISITS: u32 = 1;

/// A validated blueprint: a graph of nodes and edges walked from `entry`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blueprint {
    /// The blueprint's name (`[a-z0-9_-]+`).
    pub name: String,
    /// What it does, for people.
    pub description: Option<String>,
    /// The id of the first node.
    pub entry: String,
    /// Declared parameters, by name.
    pub params: BTreeMap<String, Param>,
    /// The most nodes one run may execute, counting repeats (default 100).
    pub max_steps: u32,
    /// What one run may spend on the model (`budget: { tokens, requests, wall }`);
    /// `None`: the config's `[budget]` applies.
    pub budget: Option<Budget>,
    /// The nodes, in file order.
    pub nodes: Vec<Node>,
    /// The edges, in file order (the order they are tried in).
    pub edges: Vec<Edge>,
}

impl Blueprint {
    /// The node with id `id`, if any.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The edges leaving node `id`, in the order they are tried.
    pub fn edges_from<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Edge> + 'a {
        self.edges.iter().filter(move |e| e.from == id)
    }

    /// The node ids, in file order.
    pub fn node_ids(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| n.id.as_str())
    }
}

/// A declared parameter (`params: { NAME: { default, description } }`).
///
/// A param without a default is required: a run must set it (`--param NAME=VALUE`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Param {
    /// The value used when the run does not set one.
    #[serde(
        default,
        deserialize_with = "scalar::optional_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub default: Option<String>,
    /// What it is for, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One node of the graph: the common fields plus its type's own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// The node's id (its key under `nodes:`).
    pub id: String,
    /// What it does, for people.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// How long one visit may take; `None` is no limit.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "duration::serialize"
    )]
    pub timeout: Option<Duration>,
    /// How many times one run may enter this node (default 1).
    pub max_visits: u32,
    /// Environment variables for the node's command or sandbox (values may hold
    /// placeholders).
    pub env: BTreeMap<String, String>,
    /// The type and its fields.
    #[serde(flatten)]
    pub spec: NodeSpec,
}

impl Node {
    /// The node's type.
    pub fn node_type(&self) -> NodeType {
        self.spec.node_type()
    }

    /// Which handler runs this node (an `exec` with a `container` runs in a sandbox).
    pub fn handler_kind(&self) -> HandlerKind {
        match &self.spec {
            NodeSpec::Provision(_) => HandlerKind::Provision,
            NodeSpec::Checkout(_) => HandlerKind::Checkout,
            NodeSpec::Exec(exec) if exec.container.is_some() => HandlerKind::SandboxExec,
            NodeSpec::Exec(_) => HandlerKind::HostExec,
            NodeSpec::AgentSandbox(_) => HandlerKind::AgentSandbox,
            NodeSpec::Agent(_) => HandlerKind::Agent,
        }
    }

    /// Every string of this node that may hold placeholders, with the field it is
    /// in (`command`, `env.PATH`, …), in a stable order.
    pub fn template_fields(&self) -> Vec<(String, &str)> {
        let mut fields: Vec<(String, &str)> = self
            .spec
            .template_fields()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        for (name, value) in &self.env {
            fields.push((format!("env.{name}"), value.as_str()));
        }
        fields
    }

    /// Replaces every placeholder-bearing string with `render(field, text)`.
    ///
    /// # Errors
    /// The first error `render` returns.
    pub fn map_templates<E>(
        &self,
        mut render: impl FnMut(&str, &str) -> Result<String, E>,
    ) -> Result<Node, E> {
        let mut node = self.clone();
        for (name, value) in node.spec.template_fields_mut() {
            *value = render(name, value)?;
        }
        for (name, value) in node.env.iter_mut() {
            *value = render(&format!("env.{name}"), value)?;
        }
        Ok(node)
    }
}

/// A node's type and type-specific fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NodeSpec {
    /// Create a sandbox (output: the sandbox id).
    Provision(ProvisionSpec),
    /// Get code into a sandbox.
    Checkout(CheckoutSpec),
    /// Run a command, on the host or in a sandbox (output: stdout tail).
    Exec(ExecSpec),
    /// Drive the in-sandbox agent over ACP (output: its final message).
    AgentSandbox(AgentSandboxSpec),
    /// Run the in-process agent on the host workspace (output: its final message).
    Agent(AgentSpec),
}

impl NodeSpec {
    /// The node type.
    pub fn node_type(&self) -> NodeType {
        match self {
            NodeSpec::Provision(_) => NodeType::Provision,
            NodeSpec::Checkout(_) => NodeType::Checkout,
            NodeSpec::Exec(_) => NodeType::Exec,
            NodeSpec::AgentSandbox(_) => NodeType::AgentSandbox,
            NodeSpec::Agent(_) => NodeType::Agent,
        }
    }

    fn template_fields(&self) -> Vec<(&'static str, &str)> {
        fn push<'a>(out: &mut Vec<(&'static str, &'a str)>, name: &'static str, v: &'a str) {
            out.push((name, v));
        }
        let mut out = Vec::new();
        match self {
            NodeSpec::Provision(p) => {
                push(&mut out, "image", &p.image);
                if let Some(v) = &p.network {
                    push(&mut out, "network", v);
                }
                if let Some(v) = &p.workdir {
                    push(&mut out, "workdir", v);
                }
            }
            NodeSpec::Checkout(c) => {
                push(&mut out, "container", &c.container);
                push(&mut out, "repo", &c.repo);
                if let Some(v) = &c.git_ref {
                    push(&mut out, "ref", v);
                }
                if let Some(v) = &c.dest {
                    push(&mut out, "dest", v);
                }
            }
            NodeSpec::Exec(e) => {
                push(&mut out, "command", &e.command);
                if let Some(v) = &e.container {
                    push(&mut out, "container", v);
                }
                if let Some(v) = &e.workdir {
                    push(&mut out, "workdir", v);
                }
            }
            NodeSpec::AgentSandbox(a) => {
                push(&mut out, "container", &a.container);
                push(&mut out, "prompt", &a.prompt);
            }
            NodeSpec::Agent(a) => push(&mut out, "prompt", &a.prompt),
        }
        out
    }

    fn template_fields_mut(&mut self) -> Vec<(&'static str, &mut String)> {
        let mut out: Vec<(&'static str, &mut String)> = Vec::new();
        match self {
            NodeSpec::Provision(p) => {
                out.push(("image", &mut p.image));
                if let Some(v) = &mut p.network {
                    out.push(("network", v));
                }
                if let Some(v) = &mut p.workdir {
                    out.push(("workdir", v));
                }
            }
            NodeSpec::Checkout(c) => {
                out.push(("container", &mut c.container));
                out.push(("repo", &mut c.repo));
                if let Some(v) = &mut c.git_ref {
                    out.push(("ref", v));
                }
                if let Some(v) = &mut c.dest {
                    out.push(("dest", v));
                }
            }
            NodeSpec::Exec(e) => {
                out.push(("command", &mut e.command));
                if let Some(v) = &mut e.container {
                    out.push(("container", v));
                }
                if let Some(v) = &mut e.workdir {
                    out.push(("workdir", v));
                }
            }
            NodeSpec::AgentSandbox(a) => {
                out.push(("container", &mut a.container));
                out.push(("prompt", &mut a.prompt));
            }
            NodeSpec::Agent(a) => out.push(("prompt", &mut a.prompt)),
        }
        out
    }
}

/// `provision`: create a sandbox from an image. Output: the sandbox id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvisionSpec {
    /// The image to run (`boitata-agent-rust:latest`).
    pub image: String,
    /// CPU limit, in CPUs (`1.5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Memory limit in bytes; written as bytes or with a unit (`512m`, `2g`, `1GiB`).
    #[serde(
        default,
        rename = "memory",
        deserialize_with = "memory::deserialize",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_bytes: Option<u64>,
    /// The most processes the sandbox may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u32>,
    /// The network: `run` (the default: the run's own isolated network), `none`, or
    /// `bridge` (Docker's shared bridge: not isolated, an explicit opt-out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// The working directory inside the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// What the sandbox may reach beyond its run: `none` (nothing, not even the model
    /// gateway), `gateway` (the default: the model gateway only) or `allow` (the
    /// gateway, and the destinations in `allow` through the run's egress proxy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<String>,
    /// With `egress: allow`: the destinations allowed through the proxy, as
    /// [`EgressRule`](crate::egress::EgressRule)s (`*.pypi.org`, `host:port`, CIDRs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// With `egress: allow`: every destination through the proxy (needed for `*` and
    /// `0.0.0.0/0` in `allow`). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_all: Option<bool>,
}

/// `checkout`: put a repository into a sandbox. A host path is copied in and cloned
/// there, never bind-mounted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckoutSpec {
    /// The sandbox id (usually `"{PROVISION_NODE}"`).
    pub container: String,
    /// A git URL or a host path.
    pub repo: String,
    /// The branch, tag or commit to check out.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// Where to put it inside the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest: Option<String>,
}

/// `exec`: run `sh -c COMMAND`, in a sandbox when `container` is set, else on the host
/// in the workspace. Output: the tail of stdout; success iff exit code 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecSpec {
    /// The shell command.
    pub command: String,
    /// The sandbox to run in; `None` runs on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The directory the command starts in. In a sandbox: an absolute path inside it
    /// (default: the sandbox's working directory). On the host: a path relative to the
    /// workspace, or absolute (default: the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
}

/// `agent_sandbox`: prompt the agent running inside a sandbox (ACP over TCP).
/// Output: its final message; success iff the turn ended normally.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSandboxSpec {
    /// The sandbox id.
    pub container: String,
    /// What to ask the agent.
    pub prompt: String,
    /// The port the agent listens on inside the sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The most model requests for this node (default: the config's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

/// `agent`: run the in-process agent on the host workspace.
/// Output: its final message; success iff it ended its turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// What to ask the agent.
    pub prompt: String,
    /// The most model requests for this node (default: the config's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
}

/// The node types a blueprint may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeType {
    /// [`ProvisionSpec`].
    Provision,
    /// [`CheckoutSpec`].
    Checkout,
    /// [`ExecSpec`].
    Exec,
    /// [`AgentSandboxSpec`].
    AgentSandbox,
    /// [`AgentSpec`].
    Agent,
}

/// The fields every node type accepts, besides its own.
pub const COMMON_FIELDS: &[&str] = &["type", "description", "timeout", "max_visits", "env"];

impl NodeType {
    /// Every type, in the order they are listed to users.
    pub const ALL: [NodeType; 5] = [
        NodeType::Provision,
        NodeType::Checkout,
        NodeType::Exec,
        NodeType::AgentSandbox,
        NodeType::Agent,
    ];

    /// The name used in `type:`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeType::Provision => "provision",
            NodeType::Checkout => "checkout",
            NodeType::Exec => "exec",
            NodeType::AgentSandbox => "agent_sandbox",
            NodeType::Agent => "agent",
        }
    }

    /// Parses [`NodeType::as_str`]'s output.
    pub fn parse(name: &str) -> Option<NodeType> {
        NodeType::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// The type's own fields (the common ones are [`COMMON_FIELDS`]).
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            NodeType::Provision => &[
                "image",
                "cpus",
                "memory",
                "pids",
                "network",
                "workdir",
                "egress",
                "allow",
                "allow_all",
            ],
            NodeType::Checkout => &["container", "repo", "ref", "dest"],
            NodeType::Exec => &["command", "container", "workdir"],
            NodeType::AgentSandbox => &["container", "prompt", "port", "max_turns"],
            NodeType::Agent => &["prompt", "max_turns"],
        }
    }

    /// The fields a node of this type must set.
    pub fn required_fields(self) -> &'static [&'static str] {
        match self {
            NodeType::Provision => &["image"],
            NodeType::Checkout => &["container", "repo"],
            NodeType::Exec => &["command"],
            NodeType::AgentSandbox => &["container", "prompt"],
            NodeType::Agent => &["prompt"],
        }
    }

    /// True for the types that need a sandbox backend (not counting `exec`, which
    /// needs one only with `container`).
    pub fn needs_sandbox(self) -> bool {
        matches!(
            self,
            NodeType::Provision | NodeType::Checkout | NodeType::AgentSandbox
        )
    }
}

impl fmt::Display for NodeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which [`NodeHandler`](crate::NodeHandler) runs a node: its type, with `exec` split
/// by where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HandlerKind {
    /// `provision`.
    Provision,
    /// `checkout`.
    Checkout,
    /// `exec` with `container`.
    SandboxExec,
    /// `exec` without `container` (this crate's [`HostExec`](crate::host::HostExec)).
    HostExec,
    /// `agent_sandbox`.
    AgentSandbox,
    /// `agent` (this crate's [`HostAgent`](crate::host::HostAgent)).
    Agent,
}

impl HandlerKind {
    /// Every kind.
    pub const ALL: [HandlerKind; 6] = [
        HandlerKind::Provision,
        HandlerKind::Checkout,
        HandlerKind::SandboxExec,
        HandlerKind::HostExec,
        HandlerKind::AgentSandbox,
        HandlerKind::Agent,
    ];

    /// True when the kind runs in a sandbox (and so needs a sandbox backend).
    pub fn needs_sandbox(self) -> bool {
        !matches!(self, HandlerKind::HostExec | HandlerKind::Agent)
    }

    /// A short description for messages: `provision`, `exec in a container`, ….
    pub fn describe(self) -> &'static str {
        match self {
            HandlerKind::Provision => "provision",
            HandlerKind::Checkout => "checkout",
            HandlerKind::SandboxExec => "exec in a container",
            HandlerKind::HostExec => "exec on the host",
            HandlerKind::AgentSandbox => "agent_sandbox",
            HandlerKind::Agent => "agent",
        }
    }
}

impl fmt::Display for HandlerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// One edge: from a node to a node (or [`END`]), taken when `when` matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Edge {
    /// The node it leaves.
    pub from: String,
    /// The node it leads to, or [`END`].
    pub to: String,
    /// When it is taken.
    #[serde(skip_serializing_if = "When::is_always")]
    pub when: When,
}

/// When an edge is taken, given the outcome of the node it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum When {
    /// Always (`when` absent).
    #[default]
    Always,
    /// The node succeeded.
    Success,
    /// The node failed (whatever its exit code).
    Failure,
    /// The node exited with this code (0–255).
    ExitCode(i64),
}

impl When {
    /// True for [`When::Always`].
    pub fn is_always(&self) -> bool {
        matches!(self, When::Always)
    }

    /// Whether an edge with this condition is taken after a node that ended with
    /// `outcome` and (for commands) `exit_code`.
    pub fn matches(self, outcome: boitata_core::Outcome, exit_code: Option<i64>) -> bool {
        match self {
            When::Always => true,
            When::Success => outcome == boitata_core::Outcome::Success,
            When::Failure => outcome == boitata_core::Outcome::Failure,
            When::ExitCode(code) => exit_code == Some(code),
        }
    }
}

impl fmt::Display for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            When::Always => f.write_str("always"),
            When::Success => f.write_str("success"),
            When::Failure => f.write_str("failure"),
            When::ExitCode(code) => write!(f, "{code}"),
        }
    }
}

impl Serialize for When {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            When::ExitCode(code) => s.serialize_i64(*code),
            other => s.serialize_str(&other.to_string()),
        }
    }
}

/// Scalars (strings, numbers, booleans) read as strings, as written: `default: 3.10`
/// is `"3.10"`.
pub(crate) mod scalar {
    use std::collections::BTreeMap;
    use std::fmt;

    use serde::de::{self, Deserializer, MapAccess, Visitor};

    struct ScalarString;

    impl<'de> Visitor<'de> for ScalarString {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string, number or boolean")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_owned())
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
            d.deserialize_any(self)
        }
    }

    /// A scalar as a string: a number as written in the blueprint (`3.10`, `007`,
    /// `0x1F`, `1e3` stay so), see [`crate::yaml::scalar_text`].
    pub(crate) fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        crate::yaml::scalar_text(d, ScalarString)
    }

    /// An optional scalar as a string (`null` is `None`).
    pub(crate) fn optional_string<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<String>, D::Error> {
        struct Opt;
        impl<'de> Visitor<'de> for Opt {
            type Value = Option<String>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                string(d).map(Some)
            }
        }
        d.deserialize_option(Opt)
    }

    /// A map of names to scalars, as strings (`env:`).
    pub(crate) fn string_map<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, String>, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = BTreeMap<String, String>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of names to values")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(BTreeMap::new())
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(BTreeMap::new())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = map.next_value_seed(Seed)?;
                    out.insert(key, value);
                }
                Ok(out)
            }
        }
        struct Seed;
        impl<'de> de::DeserializeSeed<'de> for Seed {
            type Value = String;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
                string(d)
            }
        }
        d.deserialize_any(MapVisitor)
    }
}

/// Durations written the humantime way: `90s`, `10m`, `1h 30m`.
pub(crate) mod duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Parses `text`, refusing zero.
    pub(crate) fn parse(text: &str) -> Result<Duration, String> {
        match humantime::parse_duration(text.trim()) {
            Ok(d) if d.is_zero() => Err(format!(
                "duration {text:?} is zero; use a positive duration such as 90s or 10m"
            )),
            Ok(d) => Ok(d),
            Err(e) => Err(format!(
                "invalid duration {text:?} ({e}); write it like 90s, 10m or 1h"
            )),
        }
    }

    /// An optional humantime duration.
    pub(crate) fn deserialize_optional<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        text.map(|t| parse(&t).map_err(serde::de::Error::custom))
            .transpose()
    }

    /// Writes a duration the humantime way.
    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }
}

/// Memory sizes: bytes, or a number with a unit (`k`, `m`, `g`, `t`, optionally `i`
/// and/or `b`; all binary multiples, as Docker reads them).
pub(crate) mod memory {
    use std::fmt;

    use serde::de::{self, Deserializer, Visitor};

    /// Parses `512m`, `2g`, `1GiB`, `1048576`.
    pub(crate) fn parse(text: &str) -> Result<u64, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let unit = unit.trim().to_ascii_lowercase();
        let unit = unit.trim_end_matches('b').trim_end_matches('i');
        let multiplier: u64 = match unit {
            "" => 1,
            "k" => 1 << 10,
            "m" => 1 << 20,
            "g" => 1 << 30,
            "t" => 1 << 40,
            _ => {
                return Err(format!(
                    "invalid memory size {text:?}: use bytes or a unit, e.g. 512m or 2g"
                ))
            }
        };
        let value: f64 = number.parse().map_err(|_| {
            format!("invalid memory size {text:?}: use bytes or a unit, e.g. 512m or 2g")
        })?;
        let bytes = value * multiplier as f64;
        if !(1.0..=(u64::MAX as f64)).contains(&bytes) {
            return Err(format!("memory size {text:?} is out of range"));
        }
        Ok(bytes as u64)
    }

    /// An optional memory size.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<u64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a memory size such as 512m or 2g")
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(self)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                if v == 0 {
                    return Err(E::custom("memory size 0 is out of range"));
                }
                Ok(Some(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("memory size {v} is out of range"))),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                parse(v).map(Some).map_err(E::custom)
            }
        }
        d.deserialize_option(V)
    }

    #[cfg(test)]
    mod tests {
        use super::parse;

        #[test]
        fn sizes_parse_with_binary_units() {
            assert_eq!(parse("512m"), Ok(512 << 20));
            assert_eq!(parse("2g"), Ok(2 << 30));
            assert_eq!(parse("1GiB"), Ok(1 << 30));
            assert_eq!(parse("1048576"), Ok(1 << 20));
            assert_eq!(parse("1.5k"), Ok(1536));
            assert!(parse("lots").is_err());
            assert!(parse("0").is_err());
            assert!(parse("12x").is_err());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The serde field list of `T` (what `deny_unknown_fields` accepts).
    fn serde_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
        struct Capture(std::cell::Cell<&'static [&'static str]>);
        #[derive(Debug)]
        struct Stop;
        impl std::fmt::Display for Stop {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("stop")
            }
        }
        impl std::error::Error for Stop {}
        impl serde::de::Error for Stop {
            fn custom<M: std::fmt::Display>(_: M) -> Self {
                Stop
            }
        }
        impl<'de> serde::Deserializer<'de> for &Capture {
            type Error = Stop;
            fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
                Err(Stop)
            }
            fn deserialize_struct<V: serde::de::Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Stop> {
                self.0.set(fields);
                Err(Stop)
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
                bytes byte_buf option unit unit_struct newtype_struct seq tuple
                tuple_struct map enum identifier ignored_any
            }
        }
        let capture = Capture(std::cell::Cell::new(&[]));
        let _ = T::deserialize(&capture);
        capture.0.get()
    }

    #[test]
    fn field_tables_match_the_serde_structs() {
        let cases: [(NodeType, &[&str]); 5] = [
            (NodeType::Provision, serde_fields::<ProvisionSpec>()),
            (NodeType::Checkout, serde_fields::<CheckoutSpec>()),
            (NodeType::Exec, serde_fields::<ExecSpec>()),
            (NodeType::AgentSandbox, serde_fields::<AgentSandboxSpec>()),
            (NodeType::Agent, serde_fields::<AgentSpec>()),
        ];
        for (node_type, serde) in cases {
            assert_eq!(node_type.fields(), serde, "{node_type}");
            for required in node_type.required_fields() {
                assert!(node_type.fields().contains(required), "{node_type}");
            }
        }
    }

    #[test]
    fn nodes_serialize_flat_with_their_type() {
        let node = Node {
            id: "test".into(),
            description: None,
            timeout: Some(Duration::from_secs(90)),
            max_visits: 2,
            env: BTreeMap::new(),
            spec: NodeSpec::Exec(ExecSpec {
                command: "make".into(),
                container: None,
                workdir: None,
            }),
        };
        assert_eq!(
            serde_json::to_value(&node).unwrap(),
            serde_json::json!({
                "id": "test", "timeout": "1m 30s", "max_visits": 2, "env": {},
                "type": "exec", "command": "make"
            })
        );
    }

    #[test]
    fn when_matches_outcomes_and_codes() {
        use boitata_core::Outcome::{Failure, Success};
        assert!(When::Always.matches(Failure, None));
        assert!(When::Success.matches(Success, Some(0)));
        assert!(!When::Success.matches(Failure, Some(1)));
        assert!(When::Failure.matches(Failure, Some(3)));
        assert!(When::ExitCode(3).matches(Failure, Some(3)));
        assert!(!When::ExitCode(3).matches(Failure, None));
    }
}
