//! Validation: from YAML text to a [`Blueprint`], or every problem at once.
//!
//! [`parse`] checks, and reports together with file, line and column: YAML syntax
//! (and the size and alias budgets), duplicate keys (naming both lines), unknown and
//! missing fields of the blueprint, its params, nodes and edges, the blueprint name,
//! node ids, unknown node types, field values (durations, limits, memory sizes), edges
//! from or to unknown nodes and out of `END`, bad `when`, a missing or unknown
//! `entry`, placeholders that name nothing, and, as warnings, nodes the walk can
//! never reach and placeholders naming them. Each message names the node or edge and
//! says how to fix it.
//!
//! Checks do not wait for each other: a node with an unknown field or a bad value
//! still has its other fields and its placeholders checked, and a bad param or edge
//! hides nothing else. Only what cannot be known is skipped: nothing after a YAML
//! syntax error, the placeholders of a node of unknown type (except its `env`), and
//! reachability while an edge or the entry is wrong.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use serde::Deserialize;

use crate::diagnostic::{At, Collector, Diagnostics};
use crate::egress::{EgressRule, EGRESS_MODES};
use crate::model::{
    duration, scalar, AgentSandboxSpec, AgentSpec, Blueprint, CheckoutSpec, Edge, ExecSpec, Node,
    NodeSpec, NodeType, Param, ProvisionSpec, When, COMMON_FIELDS, DEFAULT_MAX_STEPS,
    DEFAULT_MAX_VISITS, END,
};
use crate::suggest::did_you_mean;
use crate::template::{self, Piece, Reference};
use crate::yaml::{self, DeError, Key, Mapping, Span, Value, Yaml};
use boitata_core::budget::Budget;

/// A blueprint that passed validation, and the warnings it raised.
#[derive(Debug, Clone)]
pub struct Validated {
    /// The blueprint.
    pub blueprint: Blueprint,
    /// Warnings (unreachable nodes); may be empty.
    pub warnings: Diagnostics,
}

/// The fields of a blueprint file's top level.
pub const BLUEPRINT_FIELDS: &[&str] = &[
    "name",
    "description",
    "entry",
    "params",
    "max_steps",
    "budget",
    "nodes",
    "edges",
];

/// The fields of an edge.
pub const EDGE_FIELDS: &[&str] = &["from", "to", "when"];

/// The networks a `provision` node may attach to: the run's own, none, Docker's bridge.
const NETWORKS: &[&str] = &["run", "none", "bridge"];

/// The smallest `cpus` a `provision` node may set: Docker rounds less to no limit.
const MIN_CPUS: f64 = 0.01;

/// The smallest `memory` a `provision` node may set (6 MiB, Docker's own minimum).
const MIN_MEMORY_BYTES: u64 = 6 << 20;

/// Node ids that would be ambiguous in placeholders or edges.
const RESERVED_IDS: &[&str] = &[END, "task", "run", "params"];

/// Parses and validates a blueprint. `file` names it in diagnostics.
///
/// # Errors
/// [`Diagnostics`] holding every problem found (errors and warnings) when there is at
/// least one error.
pub fn parse(text: &str, file: &str) -> Result<Validated, Diagnostics> {
    let mut out = Collector::new(file, text);
    let blueprint = match yaml::read(text) {
        Ok(tree) => Checker {
            out: &mut out,
            text,
        }
        .blueprint(&tree),
        Err(e) => {
            out.error(e.span, "here", format!("invalid YAML: {}", e.message));
            None
        }
    };
    match blueprint {
        Some(blueprint) if !out.has_errors() => Ok(Validated {
            blueprint,
            warnings: out.finish(),
        }),
        _ => Err(out.finish()),
    }
}

fn list(items: &[&str]) -> String {
    items.join(", ")
}

fn is_blueprint_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

fn is_id(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The placeholder-bearing strings of a node's `env` (`("env.NAME", text)`): all
/// that is known to hold placeholders when the node's type or spec cannot be read.
fn env_templates(env: BTreeMap<String, String>) -> Vec<(String, String)> {
    env.into_iter()
        .map(|(name, text)| (format!("env.{name}"), text))
        .collect()
}

/// The common fields of a node (everything but `type`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CommonFields {
    #[serde(default)]
    description: Option<String>,
    #[serde(default, deserialize_with = "duration::deserialize_optional")]
    timeout: Option<Duration>,
    #[serde(default)]
    max_visits: Option<u32>,
    #[serde(default, deserialize_with = "scalar::string_map")]
    env: BTreeMap<String, String>,
}

/// Where each placeholder-bearing field of a node was written.
type FieldSpans = HashMap<String, Option<Span>>;

/// What was read of one node.
struct NodeRead {
    /// The node's id as written.
    id: String,
    /// The node, when it has no problem.
    node: Option<Node>,
    /// Its placeholder-bearing strings (`(field, text)`), read even when the node has
    /// other problems, so their placeholders are checked too.
    templates: Vec<(String, String)>,
    /// Where each field (and each `env.NAME`) was written.
    spans: FieldSpans,
}

struct Checker<'a> {
    out: &'a mut Collector,
    text: &'a str,
}

impl Checker<'_> {
    fn blueprint(&mut self, tree: &Yaml) -> Option<Blueprint> {
        self.duplicates(tree);
        let top = match &tree.value {
            Value::Map(m) => m,
            Value::Null => {
                self.out.error(
                    Some(Span::default()),
                    "empty",
                    "the file is empty: a blueprint needs name, entry, nodes and edges",
                );
                return None;
            }
            _ => {
                self.wrong_kind(
                    tree,
                    "not a mapping",
                    "a blueprint is a mapping with name, entry, nodes and edges",
                );
                return None;
            }
        };
        let start = Some(Span::default());
        let _ = self.unknown_fields(top, BLUEPRINT_FIELDS, "", "the blueprint");

        // The node ids as written, even of nodes with problems, so that edges and
        // placeholders are checked against what the author meant.
        let node_keys: Vec<&Key> = match top.get("nodes").map(|n| &n.value) {
            Some(Value::Map(m)) => m.entries.iter().map(|(k, _)| k).collect(),
            _ => Vec::new(),
        };
        let node_ids: Vec<&str> = node_keys.iter().map(|k| k.text.as_str()).collect();

        let name = match top.get("name") {
            None => {
                self.out.error(
                    start,
                    "here",
                    "missing field \"name\": add `name: NAME` (lower-case letters, digits, _ and -)",
                );
                None
            }
            Some(value) => match value.as_str() {
                Some(name) if is_blueprint_name(name) => Some(name.to_owned()),
                Some(name) => {
                    self.out.error(
                        value.span,
                        "invalid name",
                        format!("name {name:?} is invalid: use lower-case letters, digits, _ and - only (e.g. {:?})", suggest_name(name)),
                    );
                    None
                }
                None => {
                    self.wrong_kind(
                        value,
                        "not a string",
                        "name must be a string of lower-case letters, digits, _ and -",
                    );
                    None
                }
            },
        };
        let description = self.typed::<Option<String>>(top.get("description"), "", "the blueprint");
        let max_steps = self
            .typed::<Option<u32>>(top.get("max_steps"), "", "the blueprint")
            .flatten();
        if max_steps == Some(0) {
            self.out.error(
                top.get("max_steps").and_then(|v| v.span),
                "zero",
                "max_steps must be at least 1 (the default is 100)",
            );
        }
        let budget = self.budget(top.get("budget"));
        let params = self.params(top.get("params"));
        // The param names as written, even when some params have problems; `None`
        // when `params` is not a mapping, so `{params.NAME}` cannot be checked.
        let param_names: Option<Vec<&str>> = match top.get("params").map(|p| &p.value) {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(Value::Map(m)) => Some(m.entries.iter().map(|(k, _)| k.text.as_str()).collect()),
            Some(_) => None,
        };
        let read_nodes = self.nodes(top, start);
        let edges = self.edges(top.get("edges"), &node_ids);
        let entry = self.entry(top, start, &node_ids);

        let reachable = match (&entry, &edges) {
            (Some(entry), Some(edges)) => Some(self.reachability(entry, edges, &node_keys)),
            _ => None,
        };
        for read in &read_nodes {
            self.placeholders(read, param_names.as_deref(), &node_ids, reachable.as_ref());
        }
        let nodes: Vec<Node> = read_nodes.into_iter().filter_map(|r| r.node).collect();
        Some(Blueprint {
            name: name?,
            description: description?,
            entry: entry?,
            params: params?,
            max_steps: max_steps.unwrap_or(DEFAULT_MAX_STEPS),
            budget: budget?,
            nodes,
            edges: edges?,
        })
    }

    /// Reports every duplicate key in the tree, naming both lines.
    fn duplicates(&mut self, tree: &Yaml) {
        match &tree.value {
            Value::Map(m) => {
                for (first, again) in &m.duplicates {
                    let line = self.out.line_of(first.span).unwrap_or(0);
                    self.out.error(
                        again.span,
                        "written again here",
                        format!(
                            "duplicate key {:?}: it is first written on line {line}; remove one of the two",
                            first.text
                        ),
                    );
                    self.out.also(first.span, "first written here");
                }
                for (_, value) in &m.entries {
                    self.duplicates(value);
                }
            }
            Value::Seq(items) => {
                for item in items {
                    self.duplicates(item);
                }
            }
            _ => {}
        }
    }

    /// Reports that `value` is not of the kind `expected` describes, at `value`:
    /// "`expected`, not a list" (or whatever `value` is), labelled `label`.
    fn wrong_kind(&mut self, value: &Yaml, label: &str, expected: impl std::fmt::Display) {
        self.out.error(
            value.span,
            label,
            format!("{expected}, not {}", value.kind()),
        );
    }

    /// Reports each key of `map` not in `allowed`.
    /// Returns false when there was one.
    fn unknown_fields(
        &mut self,
        map: &Mapping,
        allowed: &[&str],
        context: &str,
        what: &str,
    ) -> bool {
        let mut ok = true;
        for (key, _) in &map.entries {
            if !allowed.contains(&key.text.as_str()) {
                ok = false;
                self.out.error(
                    key.span,
                    "unknown field",
                    format!(
                        "{context}unknown field {:?} in {what} (fields: {}){}",
                        key.text,
                        list(allowed),
                        did_you_mean(&key.text, allowed.iter().copied())
                    ),
                );
            }
        }
        ok
    }

    /// Reads a typed value, reporting a located error if it does not fit.
    /// `budget: { tokens, requests, wall }`: each limit optional, none zero.
    fn budget(&mut self, value: Option<&Yaml>) -> Option<Option<Budget>> {
        let budget = self.typed::<Option<Budget>>(value, "budget: ", "the blueprint")?;
        if let (Some(budget), Some(Value::Map(fields))) = (&budget, value.map(|v| &v.value)) {
            let zero = [
                ("tokens", budget.tokens == Some(0)),
                ("requests", budget.requests == Some(0)),
                ("wall", budget.wall.is_some_and(|w| w.is_zero())),
            ];
            for (field, is_zero) in zero {
                if is_zero {
                    let span = fields.get(field).and_then(|v| v.span);
                    self.out.error(
                        span,
                        "zero",
                        format!(
                            "budget.{field} is zero, so no model request could ever be made: \
                             set a limit above zero, or leave {field} out for none"
                        ),
                    );
                }
            }
        }
        Some(budget)
    }

    fn typed<T: for<'de> Deserialize<'de> + Default>(
        &mut self,
        value: Option<&Yaml>,
        context: &str,
        what: &str,
    ) -> Option<T> {
        let Some(value) = value else {
            return Some(T::default());
        };
        self.read(value, context, what)
    }

    fn read<T: for<'de> Deserialize<'de>>(
        &mut self,
        value: &Yaml,
        context: &str,
        what: &str,
    ) -> Option<T> {
        match T::deserialize(value) {
            Ok(v) => Some(v),
            Err(e) => {
                self.read_error(&e, value.span, context, what);
                None
            }
        }
    }

    fn read_error(&mut self, e: &DeError, whole: Option<Span>, context: &str, what: &str) {
        let field = if e.path.is_empty() {
            String::new()
        } else {
            format!("field {:?}: ", e.path.join("."))
        };
        let what = if what.is_empty() {
            String::new()
        } else {
            format!(" in {what}")
        };
        self.out.error(
            e.span.or(whole),
            "here",
            format!("{context}{field}{}{what}", lower(&e.message)),
        );
    }

    /// Reads a `T` from the fields `entries` of the mapping written at `whole`, and
    /// reports every field whose value does not fit, not only the first: a field at
    /// fault is reported, then left out (a `required` one is replaced by an empty
    /// string) and the rest is read again.
    ///
    /// Returns what could be read from the fields that fit (`None` only when an error
    /// names no field) and whether every field fit.
    fn read_fields<T: for<'de> Deserialize<'de>>(
        &mut self,
        mut entries: Vec<(Key, Yaml)>,
        required: &[&str],
        whole: Option<Span>,
        context: &str,
    ) -> (Option<T>, bool) {
        let blank = |span| Yaml::new(Value::Str(String::new()), span);
        let mut all_fit = true;
        loop {
            let map = Yaml::new(
                Value::Map(Mapping {
                    entries: entries.clone(),
                    duplicates: Vec::new(),
                }),
                whole,
            );
            let e = match T::deserialize(&map) {
                Ok(value) => return (Some(value), all_fit),
                Err(e) => e,
            };
            self.read_error(&e, whole, context, "");
            all_fit = false;
            let at_fault = e
                .path
                .first()
                .and_then(|field| entries.iter().position(|(k, _)| &k.text == field));
            let Some(index) = at_fault else {
                return (None, false);
            };
            let (key, value) = &mut entries[index];
            if !required.contains(&key.text.as_str()) {
                entries.remove(index);
            } else if value.value != Value::Str(String::new()) {
                *value = blank(value.span);
            } else {
                return (None, false);
            }
        }
    }

    fn params(&mut self, value: Option<&Yaml>) -> Option<BTreeMap<String, Param>> {
        let mut params = BTreeMap::new();
        let Some(value) = value else {
            return Some(params);
        };
        let map = match &value.value {
            Value::Null => return Some(params),
            Value::Map(m) => m,
            _ => {
                self.wrong_kind(
                    value,
                    "not a mapping",
                    "params must be a mapping of names to { default, description }",
                );
                return None;
            }
        };
        let mut ok = true;
        for (key, param) in &map.entries {
            if !is_id(&key.text) {
                self.out.error(
                    key.span,
                    "invalid name",
                    format!(
                        "param {:?}: invalid name: use letters, digits, _ and - only",
                        key.text
                    ),
                );
                ok = false;
                continue;
            }
            let context = format!("param {:?}: ", key.text);
            let parsed = match &param.value {
                Value::Null => Some(Param::default()),
                Value::Map(_) => self.read::<Param>(param, &context, ""),
                _ => {
                    self.wrong_kind(
                        param,
                        "not a mapping",
                        format_args!(
                            "param {:?}: expected a mapping such as {{ default: VALUE, description: TEXT }}",
                            key.text
                        ),
                    );
                    None
                }
            };
            match parsed {
                Some(p) => {
                    params.insert(key.text.clone(), p);
                }
                None => ok = false,
            }
        }
        ok.then_some(params)
    }

    fn nodes(&mut self, top: &Mapping, start: At) -> Vec<NodeRead> {
        let mut nodes = Vec::new();
        let map = match top.get("nodes") {
            None => {
                self.out.error(
                    start,
                    "here",
                    "missing field \"nodes\": add `nodes:` with at least one node, e.g. `test: { type: exec, command: \"cargo test\" }`",
                );
                return nodes;
            }
            Some(value) => match &value.value {
                Value::Map(m) if !m.entries.is_empty() => m,
                Value::Map(_) | Value::Null => {
                    self.out.error(
                        value.span.or(top.key("nodes").and_then(|k| k.span)),
                        "no nodes",
                        "nodes is empty: add at least one node, e.g. `test: { type: exec, command: \"cargo test\" }`",
                    );
                    return nodes;
                }
                _ => {
                    self.wrong_kind(
                        value,
                        "not a mapping",
                        "nodes must be a mapping of node ids to nodes",
                    );
                    return nodes;
                }
            },
        };
        for (key, value) in &map.entries {
            nodes.push(self.node(key, value));
        }
        nodes
    }

    /// Checks one node. Every check runs even when another fails: a node with an
    /// unknown field or a bad value still has its other fields and its placeholders
    /// checked. Only what cannot be known is skipped: without a known type, only the
    /// `env` values are known to hold placeholders.
    fn node(&mut self, key: &Key, value: &Yaml) -> NodeRead {
        let id = key.text.as_str();
        let mut read = NodeRead {
            id: id.to_owned(),
            node: None,
            templates: Vec::new(),
            spans: HashMap::new(),
        };
        let mut ok = true;
        if RESERVED_IDS.contains(&id) {
            self.out.error(
                key.span,
                "reserved",
                format!(
                    "node id {id:?} is reserved ({}): rename the node",
                    list(RESERVED_IDS)
                ),
            );
            ok = false;
        } else if !is_id(id) {
            self.out.error(
                key.span,
                "invalid id",
                format!("node id {id:?} is invalid: use letters, digits, _ and - only"),
            );
            ok = false;
        }
        let Some(map) = value.as_map() else {
            self.out.error(
                value.span.or(key.span),
                "not a mapping",
                format!(
                    "node {id:?}: expected a mapping such as {{ type: exec, command: \"make test\" }}, not {}",
                    value.kind()
                ),
            );
            return read;
        };
        for (field, field_value) in &map.entries {
            read.spans.insert(field.text.clone(), field_value.span);
        }
        if let Some(env) = map.get("env").and_then(Yaml::as_map) {
            for (name, env_value) in &env.entries {
                if !is_env_name(&name.text) {
                    self.out.error(
                        name.span,
                        "invalid name",
                        format!(
                            "node {id:?}: env name {:?} is invalid: use letters, digits and _, not starting with a digit",
                            name.text
                        ),
                    );
                    ok = false;
                }
                read.spans
                    .insert(format!("env.{}", name.text), env_value.span);
            }
        }
        let node_type = self.node_type(id, key, map);

        let context = format!("node {id:?}: ");
        let pick = |names: &[&str]| -> Vec<(Key, Yaml)> {
            map.entries
                .iter()
                .filter(|(k, _)| names.contains(&k.text.as_str()))
                .cloned()
                .collect()
        };
        let (common, common_fit) =
            self.read_fields::<CommonFields>(pick(&COMMON_FIELDS[1..]), &[], value.span, &context);
        ok &= common_fit;
        let common = common.unwrap_or_default();
        if common.max_visits == Some(0) {
            self.out.error(
                map.get("max_visits").and_then(|v| v.span),
                "zero",
                format!("node {id:?}: max_visits must be at least 1 (the default is 1)"),
            );
            ok = false;
        }
        let Some(node_type) = node_type else {
            read.templates = env_templates(common.env);
            return read;
        };

        let allowed: Vec<&str> = node_type
            .fields()
            .iter()
            .chain(COMMON_FIELDS)
            .copied()
            .collect();
        for (field, _) in &map.entries {
            if !allowed.contains(&field.text.as_str()) {
                self.out.error(
                    field.span,
                    "unknown field",
                    format!(
                        "node {id:?}: unknown field {:?} for type {node_type} (fields: {}){}",
                        field.text,
                        list(&allowed),
                        did_you_mean(&field.text, allowed.iter().copied())
                    ),
                );
                ok = false;
            }
        }
        let required = node_type.required_fields();
        let mut spec_fields = pick(node_type.fields());
        for field in required {
            if map.get(field).is_none() {
                self.out.error(
                    key.span,
                    "missing field",
                    format!(
                        "node {id:?}: missing field {field:?} (type {node_type} needs: {})",
                        list(required)
                    ),
                );
                ok = false;
                // Read the rest as if it were there, so their values are checked too.
                spec_fields.push((
                    Key {
                        text: (*field).to_owned(),
                        span: None,
                    },
                    Yaml::new(Value::Str(String::new()), None),
                ));
            }
        }
        let (spec, spec_fit) = match node_type {
            NodeType::Provision => {
                let (spec, fit) =
                    self.read_fields::<ProvisionSpec>(spec_fields, required, value.span, &context);
                (spec.map(NodeSpec::Provision), fit)
            }
            NodeType::Checkout => {
                let (spec, fit) =
                    self.read_fields::<CheckoutSpec>(spec_fields, required, value.span, &context);
                (spec.map(NodeSpec::Checkout), fit)
            }
            NodeType::Exec => {
                let (spec, fit) =
                    self.read_fields::<ExecSpec>(spec_fields, required, value.span, &context);
                (spec.map(NodeSpec::Exec), fit)
            }
            NodeType::AgentSandbox => {
                let (spec, fit) = self.read_fields::<AgentSandboxSpec>(
                    spec_fields,
                    required,
                    value.span,
                    &context,
                );
                (spec.map(NodeSpec::AgentSandbox), fit)
            }
            NodeType::Agent => {
                let (spec, fit) =
                    self.read_fields::<AgentSpec>(spec_fields, required, value.span, &context);
                (spec.map(NodeSpec::Agent), fit)
            }
        };
        ok &= spec_fit;
        let Some(spec) = spec else {
            read.templates = env_templates(common.env);
            return read;
        };
        ok &= self.limits(id, &spec, map, &read.spans);
        let node = Node {
            id: id.to_owned(),
            description: common.description,
            timeout: common.timeout,
            max_visits: common.max_visits.unwrap_or(DEFAULT_MAX_VISITS),
            env: common.env,
            spec,
        };
        read.templates = node
            .template_fields()
            .into_iter()
            .map(|(field, text)| (field, text.to_owned()))
            .collect();
        if ok {
            read.node = Some(node);
        }
        read
    }

    /// Checks the values of a `provision` node's sandbox settings and an agent node's
    /// `max_turns` that parse but would fail at run time or silently weaken a limit
    /// (`cpus: 0.0000000001` is no CPU limit at all to Docker). A templated value is
    /// checked after substitution, at run time. Returns false when one is wrong.
    fn limits(
        &mut self,
        id: &str,
        spec: &NodeSpec,
        written: &Mapping,
        spans: &HashMap<String, Option<Span>>,
    ) -> bool {
        let mut problems: Vec<(&str, String)> = Vec::new();
        match spec {
            NodeSpec::Provision(p) => {
                // Only an empty string as written: a value already reported as not a
                // string was read as empty and needs no second error.
                let written_empty = written
                    .get("image")
                    .and_then(Yaml::as_str)
                    .is_some_and(|image| image.trim().is_empty());
                if written_empty {
                    problems.push((
                        "image",
                        "image is empty: name an image, e.g. boitata-agent-rust:latest".into(),
                    ));
                }
                if let Some(cpus) = p.cpus {
                    if !(cpus >= MIN_CPUS && cpus.is_finite()) {
                        problems.push((
                            "cpus",
                            format!("cpus {cpus} is below the minimum: use at least {MIN_CPUS} (CPUs, e.g. 0.5 or 2)"),
                        ));
                    }
                }
                if let Some(bytes) = p.memory_bytes {
                    if bytes < MIN_MEMORY_BYTES {
                        problems.push((
                            "memory",
                            format!(
                                "memory {bytes} bytes is below the minimum of 6m: use bytes or a unit (k, m, g, t: binary multiples), e.g. 512m or 2g"
                            ),
                        ));
                    }
                }
                if p.pids == Some(0) {
                    problems.push((
                        "pids",
                        "pids 0 would mean no limit: use at least 1 (e.g. 512), or leave it out for the default".into(),
                    ));
                }
                if let Some(network) = p.network.as_deref().map(str::trim) {
                    if !network.contains('{') && !NETWORKS.contains(&network) {
                        problems.push((
                            "network",
                            format!(
                                "network {network:?} is not supported: use run (the default), \
                                 none or bridge (not isolated)"
                            ),
                        ));
                    }
                }
                problems.extend(egress_problems(p));
                if let Some(workdir) = p.workdir.as_deref().map(str::trim) {
                    if !workdir.starts_with('/') && !workdir.starts_with('{') {
                        problems.push((
                            "workdir",
                            format!("workdir {workdir:?} is not an absolute path: write it from the sandbox root, e.g. /workspace"),
                        ));
                    }
                }
            }
            NodeSpec::AgentSandbox(AgentSandboxSpec { max_turns, .. })
            | NodeSpec::Agent(AgentSpec { max_turns, .. }) => {
                if *max_turns == Some(0) {
                    problems.push((
                        "max_turns",
                        "max_turns must be at least 1 (leave it out for the config's default)"
                            .into(),
                    ));
                }
            }
            NodeSpec::Checkout(_) | NodeSpec::Exec(_) => {}
        }
        let ok = problems.is_empty();
        for (field, message) in problems {
            self.out.error(
                spans.get(field).copied().flatten(),
                "here",
                format!("node {id:?}: {message}"),
            );
        }
        ok
    }

    /// The node's `type`, or `None` (reported) when it is missing or unknown.
    fn node_type(&mut self, id: &str, key: &Key, map: &Mapping) -> Option<NodeType> {
        let types: Vec<&str> = NodeType::ALL.iter().map(|t| t.as_str()).collect();
        let Some(t) = map.get("type") else {
            self.out.error(
                key.span,
                "no type",
                format!(
                    "node {id:?}: missing field \"type\" (types: {})",
                    list(&types)
                ),
            );
            return None;
        };
        let Some(name) = t.as_str() else {
            self.wrong_kind(
                t,
                "not a string",
                format_args!("node {id:?}: type must be one of {}", list(&types)),
            );
            return None;
        };
        let node_type = NodeType::parse(name);
        if node_type.is_none() {
            self.out.error(
                t.span,
                "unknown type",
                format!(
                    "node {id:?}: unknown type {name:?} (types: {}){}",
                    list(&types),
                    did_you_mean(name, types.iter().copied())
                ),
            );
        }
        node_type
    }

    fn edges(&mut self, value: Option<&Yaml>, node_ids: &[&str]) -> Option<Vec<Edge>> {
        let mut edges = Vec::new();
        let Some(value) = value else {
            return Some(edges);
        };
        let items = match &value.value {
            Value::Null => return Some(edges),
            Value::Seq(items) => items,
            _ => {
                self.wrong_kind(
                    value,
                    "not a list",
                    "edges must be a list such as `- { from: a, to: b, when: success }`",
                );
                return None;
            }
        };
        let mut ok = true;
        let mut targets: Vec<&str> = node_ids.to_vec();
        targets.push(END);
        let nodes_list = if node_ids.is_empty() {
            "none".to_owned()
        } else {
            list(node_ids)
        };
        for (index, item) in items.iter().enumerate() {
            let number = index + 1;
            let Some(map) = item.as_map() else {
                self.wrong_kind(
                    item,
                    "not a mapping",
                    format_args!(
                        "edge {number}: expected a mapping such as {{ from: a, to: b, when: success }}"
                    ),
                );
                ok = false;
                continue;
            };
            let from = map.get("from");
            let to = map.get("to");
            let label = match from.and_then(Yaml::as_str) {
                Some(from) => format!("edge from {from:?}"),
                None => format!("edge {number}"),
            };
            let mut edge_ok =
                self.unknown_fields(map, EDGE_FIELDS, &format!("{label}: "), "an edge");

            let endpoint = |this: &mut Self, field: &str, value: Option<&Yaml>| -> Option<String> {
                let Some(value) = value else {
                    this.out.error(
                        item.span,
                        "here",
                        format!(
                            "{label}: missing field {field:?}: add `{field}: NODE` (nodes: {nodes_list})"
                        ),
                    );
                    return None;
                };
                match &value.value {
                    Value::Str(s) => Some(s.clone()),
                    Value::Int(i) => Some(i.to_string()),
                    _ => {
                        this.wrong_kind(
                            value,
                            "not a node id",
                            format_args!(
                                "{label}: {field} must be a node id (nodes: {nodes_list})"
                            ),
                        );
                        None
                    }
                }
            };
            let from_id = endpoint(self, "from", from);
            let to_id = endpoint(self, "to", to);
            edge_ok &= from_id.is_some() && to_id.is_some();

            if let Some(from_id) = &from_id {
                let span = from.and_then(|v| v.span);
                if from_id == END {
                    self.out.error(
                        span,
                        "END has no way out",
                        "edge from END: the walk ends at END, so no edge can leave it; remove this edge or start it from a node",
                    );
                    edge_ok = false;
                } else if !node_ids.contains(&from_id.as_str()) {
                    self.out.error(
                        span,
                        "no such node",
                        format!(
                            "edge from {from_id:?}: no such node (nodes: {nodes_list}){}",
                            did_you_mean(from_id, node_ids.iter().copied())
                        ),
                    );
                    edge_ok = false;
                }
            }
            if let Some(to_id) = &to_id {
                if !targets.contains(&to_id.as_str()) {
                    let span = to.and_then(|v| v.span);
                    self.out.error(
                        span,
                        "no such node",
                        format!(
                            "{} to {to_id:?}: no such node (nodes: {nodes_list}, or END){}",
                            label,
                            did_you_mean(to_id, targets.iter().copied())
                        ),
                    );
                    edge_ok = false;
                }
            }
            let when = match map.get("when") {
                None => Some(When::Always),
                Some(w) => self.when(w, &label),
            };
            match (from_id, to_id, when) {
                (Some(from), Some(to), Some(when)) if edge_ok => {
                    edges.push(Edge { from, to, when });
                }
                _ => ok = false,
            }
        }
        ok.then_some(edges)
    }

    fn when(&mut self, value: &Yaml, label: &str) -> Option<When> {
        let bad = |this: &mut Self, shown: String, suggestion: String| {
            this.out.error(
                value.span,
                "bad when",
                format!(
                    "{label}: when {shown} is not success, failure or an exit code (0-255); omit when to always take the edge{suggestion}"
                ),
            );
            None
        };
        match &value.value {
            Value::Null => Some(When::Always),
            Value::Int(code) if (0..=255).contains(code) => Some(When::ExitCode(*code)),
            Value::Str(s) if s == "success" => Some(When::Success),
            Value::Str(s) if s == "failure" => Some(When::Failure),
            Value::Str(s) => match s.trim().parse::<i64>() {
                Ok(code) if (0..=255).contains(&code) => Some(When::ExitCode(code)),
                _ => bad(
                    self,
                    format!("{s:?}"),
                    did_you_mean(s, ["success", "failure"]),
                ),
            },
            Value::Int(code) => bad(self, code.to_string(), String::new()),
            _ => bad(self, value.kind().to_owned(), String::new()),
        }
    }

    fn entry(&mut self, top: &Mapping, start: At, node_ids: &[&str]) -> Option<String> {
        let nodes_list = if node_ids.is_empty() {
            "none yet".to_owned()
        } else {
            list(node_ids)
        };
        let Some(value) = top.get("entry") else {
            self.out.error(
                start,
                "here",
                format!(
                    "missing field \"entry\": add `entry: NODE` naming the first node to run (nodes: {nodes_list})"
                ),
            );
            return None;
        };
        let entry_text = match &value.value {
            Value::Int(i) => Some(i.to_string()),
            _ => value.as_str().map(str::to_owned),
        };
        let Some(entry) = entry_text.as_deref() else {
            self.wrong_kind(
                value,
                "not a node id",
                format_args!("entry must be a node id (nodes: {nodes_list})"),
            );
            return None;
        };
        if entry == END {
            self.out.error(
                value.span,
                "END",
                format!("entry cannot be END: name the first node to run (nodes: {nodes_list})"),
            );
            return None;
        }
        if !node_ids.contains(&entry) {
            self.out.error(
                value.span,
                "no such node",
                format!(
                    "entry {entry:?}: no such node (nodes: {nodes_list}){}",
                    did_you_mean(entry, node_ids.iter().copied())
                ),
            );
            return None;
        }
        Some(entry.to_owned())
    }

    /// Checks the placeholders of one node: their syntax, the names they use, and
    /// (a warning) a `{NODE}` whose node the walk never reaches, which would fail the
    /// run when this node runs. `param_names` is `None` when the params cannot be
    /// known; `reachable` is `None` when the graph cannot be walked (a bad edge or
    /// entry).
    fn placeholders(
        &mut self,
        read: &NodeRead,
        param_names: Option<&[&str]>,
        node_ids: &[&str],
        reachable: Option<&BTreeSet<String>>,
    ) {
        for (field, text) in &read.templates {
            let span = read.spans.get(field).copied().flatten();
            let context = format!("node {:?}: field {field:?}", read.id);
            let (pieces, errors) = template::scan(text);
            for e in errors {
                let at = self.inner_span(span, text, e.offset, e.len);
                self.out
                    .error(at, "here", format!("{context}: {}", e.message));
            }
            for piece in pieces {
                let Piece::Placeholder(p) = piece else {
                    continue;
                };
                let at = self.inner_span(span, text, p.offset, p.len);
                match &p.reference {
                    Reference::Task | Reference::RunId => {}
                    Reference::Param(name) => {
                        let Some(param_names) = param_names else {
                            continue;
                        };
                        if param_names.contains(&name.as_str()) {
                            continue;
                        }
                        let declared = if param_names.is_empty() {
                            "none are declared".to_owned()
                        } else {
                            format!("declared: {}", list(param_names))
                        };
                        let fix = match crate::suggest::closest(name, param_names.iter().copied())
                        {
                            Some(close) => format!(
                                "declare {name:?} under `params:`, or did you mean {{params.{close}}}?"
                            ),
                            None => format!("declare {name:?} under `params:`"),
                        };
                        self.out.error(
                            at,
                            "undeclared param",
                            format!(
                                "{context}: {} names no declared param ({declared}): {fix}",
                                p.reference.placeholder(),
                            ),
                        );
                    }
                    Reference::Node(name) if node_ids.contains(&name.as_str()) => {
                        let Some(reachable) = reachable else {
                            continue;
                        };
                        if reachable.contains(&read.id) && !reachable.contains(name) {
                            self.out.warning(
                                at,
                                "never runs",
                                format!(
                                    "{context}: {} names node {name:?}, which the walk never reaches, so the run fails when {:?} starts: route the walk through {name:?} before {:?}, or remove the placeholder",
                                    p.reference.placeholder(),
                                    read.id,
                                    read.id,
                                ),
                            );
                        }
                    }
                    Reference::Node(name) | Reference::Unknown(name) => {
                        let mut candidates: Vec<String> = vec!["task".into(), "run.id".into()];
                        candidates.extend(node_ids.iter().map(|n| (*n).to_owned()));
                        candidates.extend(
                            param_names
                                .unwrap_or_default()
                                .iter()
                                .map(|n| format!("params.{n}")),
                        );
                        let suggestion =
                            crate::suggest::closest(name, candidates.iter().map(String::as_str))
                                .map(|c| format!(": did you mean {{{c}}}?"))
                                .unwrap_or_default();
                        self.out.error(
                            at,
                            "unknown placeholder",
                            format!(
                                "{context}: unknown placeholder {}{suggestion} (placeholders are {{task}}, {{run.id}}, {{params.NAME}} and the node ids {}; for a literal brace write {{{{ or }}}})",
                                p.reference.placeholder(),
                                list(node_ids),
                            ),
                        );
                    }
                }
            }
        }
    }

    /// The span of `text[offset..offset+len]` inside the scalar written at `span`, when
    /// the scalar is written plainly or quoted without escapes; else the whole scalar.
    fn inner_span(
        &self,
        span: Option<Span>,
        text: &str,
        offset: usize,
        len: usize,
    ) -> Option<Span> {
        let span = span?;
        let raw = self.text.get(span.offset..span.offset + span.len)?;
        let start = if raw == text {
            0
        } else if raw.len() == text.len() + 2
            && (raw.starts_with('"') || raw.starts_with('\''))
            && raw.get(1..raw.len() - 1) == Some(text)
        {
            1
        } else {
            return Some(span);
        };
        Some(Span {
            offset: span.offset + start + offset,
            len,
        })
    }

    /// Warns about each node the walk cannot reach from `entry`; returns the ids of
    /// those it can.
    fn reachability(
        &mut self,
        entry: &str,
        edges: &[Edge],
        node_keys: &[&Key],
    ) -> BTreeSet<String> {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut queue = VecDeque::from([entry]);
        while let Some(id) = queue.pop_front() {
            if !seen.insert(id.to_owned()) {
                continue;
            }
            for edge in edges.iter().filter(|e| e.from == id) {
                queue.push_back(edge.to.as_str());
            }
        }
        for key in node_keys {
            if !seen.contains(&key.text) {
                self.out.warning(
                    key.span,
                    "unreachable",
                    format!(
                        "node {:?} is unreachable from entry {entry:?}: add an edge to it, or remove it",
                        key.text
                    ),
                );
            }
        }
        seen
    }
}

/// A serde message with its first letter lower-cased and Rust type names in words.
fn lower(message: &str) -> String {
    let mut chars = message.chars();
    let message: String = match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    };
    message
        .replace("expected u32", "expected a whole number (0 to 4294967295)")
        .replace("expected u16", "expected a port number (0 to 65535)")
        .replace("expected f64", "expected a number")
}

/// A valid blueprint name close to `name`.
fn suggest_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_owned();
    if out.is_empty() {
        "my-blueprint".to_owned()
    } else {
        out
    }
}

/// What is wrong with a `provision` node's `egress`, `allow` and `allow_all`, by field.
fn egress_problems(p: &ProvisionSpec) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    let egress = p.egress.as_deref().map(str::trim);
    if let Some(mode) = egress {
        if !EGRESS_MODES.contains(&mode) {
            problems.push((
                "egress",
                format!(
                    "egress {mode:?} is not supported: use {}",
                    EGRESS_MODES.join(", ")
                ),
            ));
            return problems;
        }
    }
    let network = p.network.as_deref().map(str::trim).unwrap_or("run");
    // Any mode, `none` too: the provision node refuses every egress field off the run
    // network, and validation must not pass what the run then refuses.
    if egress.is_some() && (network == "none" || network == "bridge") {
        problems.push((
            "egress",
            format!(
                "egress applies to the run's own network, not to network {network}: \
                 leave network out (or write network: run)"
            ),
        ));
    }
    let allowing = egress == Some("allow");
    let allow_all = p.allow_all == Some(true);
    if !allowing {
        if p.allow.is_some() {
            problems.push(("allow", "allow needs egress: allow".into()));
        }
        if p.allow_all.is_some() {
            problems.push(("allow_all", "allow_all needs egress: allow".into()));
        }
        return problems;
    }
    let rules = p.allow.as_deref().unwrap_or_default();
    if rules.is_empty() && !allow_all {
        problems.push((
            "egress",
            "egress: allow with nothing allowed: list destinations in allow \
             (e.g. allow: [\"*.pypi.org\", \"files.pythonhosted.org\"])"
                .into(),
        ));
    }
    for entry in rules {
        match EgressRule::parse(entry) {
            Err(e) => problems.push(("allow", e.to_string())),
            Ok(rule) if rule.opens_everything() && !allow_all => problems.push((
                "allow",
                format!(
                    "allow entry {entry:?} opens every destination (or a sweep of them): list the hosts needed, \
                     or set allow_all: true to mean it"
                ),
            )),
            Ok(_) => {}
        }
    }
    problems
}
