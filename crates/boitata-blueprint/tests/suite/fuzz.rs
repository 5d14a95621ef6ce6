//! Parse + validate (and render, graph, params) never panic, whatever the input.
//!
//! `proptest` cases run with the suite (`PROPTEST_CASES` raises their number); the
//! ignored `fuzz_for_a_while` runs the same generators for `BOITATA_FUZZ_SECS` seconds
//! (default 60) and prints how many inputs it tried: `scripts/fuzz-blueprint.sh`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

/// Everything a caller may do with a parsed (or rejected) input.
fn exercise(text: &str) {
    match boitata_blueprint::parse(text, "fuzz.yaml") {
        Ok(validated) => {
            let _ = boitata_blueprint::graph::mermaid(&validated.blueprint);
            let _ = boitata_blueprint::params::resolve(&validated.blueprint, &BTreeMap::new());
            let _ = validated.warnings.render(80);
            for node in &validated.blueprint.nodes {
                for (_, template) in node.template_fields() {
                    let _ = boitata_blueprint::template::parse(template);
                }
            }
        }
        Err(diagnostics) => {
            assert!(diagnostics.has_errors());
            let _ = diagnostics.render(80);
            let _ = diagnostics.to_string();
        }
    }
}

const SEED: &str = r#"name: seed
entry: box
params:
  repo: { default: "x", description: "d" }
nodes:
  box: { type: provision, image: "img:{params.repo}", memory: 2g }
  code: { type: checkout, container: "{box}", repo: "{task}" }
  test: { type: exec, command: "make {{x}}", timeout: 10s, max_visits: 2, env: { A: "1" } }
  work: { type: agent_sandbox, container: "{box}", prompt: "fix {test}" }
edges:
  - { from: box, to: code }
  - { from: code, when: success, to: test }
  - { from: test, when: 3, to: work }
  - { from: work, to: END }
"#;

const TOKENS: &[&str] = &[
    ":",
    "\n",
    "  ",
    "- ",
    "{",
    "}",
    "{{",
    "}}",
    "[",
    "]",
    ",",
    "&a ",
    "*a",
    "<<: *a",
    "'",
    "\"",
    "#",
    "!!str ",
    "!!binary ",
    "type: exec",
    "type: agent",
    "END",
    "when: 3",
    "when: failure",
    "{task}",
    "{params.repo}",
    "{run.id}",
    "{box}",
    "\t",
    "é",
    "\u{0}",
    "\u{feff}",
    "---\n",
    "...\n",
    "max_visits: 0",
    "~",
    "entry: ",
    "nodes:",
    "edges:",
    "from: ",
    "to: ",
    "? ",
    "|\n",
    ">-\n",
    "%YAML 1.2\n",
    "9999999999999999999999",
    "-1",
    "1e400",
    ".nan",
    "null",
    "true",
];

/// A seed blueprint with random token insertions, deletions and replacements.
fn mutated_seed() -> impl Strategy<Value = String> {
    let edit = (any::<u16>(), 0u8..3, 0..TOKENS.len(), 0u8..8);
    proptest::collection::vec(edit, 0..12).prop_map(|edits| {
        let mut text = SEED.to_owned();
        for (pos, op, token, len) in edits {
            let mut at = usize::from(pos) % (text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            match op {
                0 => text.insert_str(at, TOKENS[token]),
                1 => {
                    let mut end = (at + usize::from(len)).min(text.len());
                    while !text.is_char_boundary(end) {
                        end += 1;
                    }
                    text.replace_range(at..end, "");
                }
                _ => {
                    let mut end = (at + usize::from(len)).min(text.len());
                    while !text.is_char_boundary(end) {
                        end += 1;
                    }
                    text.replace_range(at..end, TOKENS[token]);
                }
            }
        }
        text
    })
}

const IDS: &[&str] = &[
    "a", "b", "box", "END", "task", "x.y", "", "tset", "ü", "run",
];
const TYPES: &[&str] = &[
    "exec",
    "agent",
    "provision",
    "checkout",
    "agent_sandbox",
    "exce",
    "1",
    "[]",
];
const FIELDS: &[&str] = &[
    "command",
    "prompt",
    "image",
    "container",
    "repo",
    "ref",
    "dest",
    "port",
    "max_turns",
    "timeout",
    "max_visits",
    "env",
    "cpus",
    "memory",
    "pids",
    "network",
    "workdir",
    "bogus",
    "description",
];
const VALUES: &[&str] = &[
    "\"{task}\"",
    "\"{a}\"",
    "\"{nope}\"",
    "\"{\"",
    "\"}\"",
    "\"{{ok}}\"",
    "3",
    "-3",
    "0",
    "70000",
    "1.5",
    "90s",
    "9x",
    "2g",
    "lots",
    "{ A: 1, B: \"{b}\" }",
    "{ 1A: x }",
    "[1, 2]",
    "~",
    "true",
    "\"{params.p}\"",
    "\"{run.id}\"",
    "\"\"",
];
const WHENS: &[&str] = &[
    "success", "failure", "3", "256", "-1", "sucess", "~", "[1]", "\"7\"",
];

/// Structurally plausible blueprints with random ids, types, fields and edges.
fn random_blueprint() -> impl Strategy<Value = String> {
    let node = (
        0..IDS.len(),
        0..TYPES.len(),
        proptest::collection::vec((0..FIELDS.len(), 0..VALUES.len()), 0..5),
    );
    let edge = (
        0..IDS.len(),
        0..IDS.len(),
        proptest::option::of(0..WHENS.len()),
    );
    (
        0..IDS.len(),
        proptest::collection::vec(node, 0..6),
        proptest::collection::vec(edge, 0..8),
        any::<bool>(),
    )
        .prop_map(|(entry, nodes, edges, params)| {
            let mut text = format!("name: fuzz\nentry: \"{}\"\n", IDS[entry]);
            if params {
                text.push_str("params:\n  p: { default: v }\n  q:\n");
            }
            text.push_str("nodes:\n");
            for (id, node_type, fields) in nodes {
                text.push_str(&format!(
                    "  \"{}\":\n    type: {}\n",
                    IDS[id], TYPES[node_type]
                ));
                for (field, value) in fields {
                    text.push_str(&format!("    {}: {}\n", FIELDS[field], VALUES[value]));
                }
            }
            text.push_str("edges:\n");
            for (from, to, when) in edges {
                text.push_str(&format!(
                    "  - {{ from: \"{}\", to: \"{}\"",
                    IDS[from], IDS[to]
                ));
                if let Some(when) = when {
                    text.push_str(&format!(", when: {}", WHENS[when]));
                }
                text.push_str(" }\n");
            }
            text
        })
}

fn arbitrary_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<u8>(), 0..2048)
        .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(text in arbitrary_text()) {
        exercise(&text);
    }

    #[test]
    fn mutated_blueprints_never_panic(text in mutated_seed()) {
        exercise(&text);
    }

    #[test]
    fn random_blueprints_never_panic(text in random_blueprint()) {
        exercise(&text);
    }
}

#[test]
fn the_seed_is_valid() {
    boitata_blueprint::parse(SEED, "seed.yaml").unwrap();
}

#[test]
#[ignore = "long-running; scripts/fuzz-blueprint.sh runs it"]
fn fuzz_for_a_while() {
    let seconds: u64 = std::env::var("BOITATA_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut runner = TestRunner::default();
    let strategies = [
        arbitrary_text().boxed(),
        mutated_seed().boxed(),
        random_blueprint().boxed(),
    ];
    let mut counts = [0u64; 3];
    let mut valid = 0u64;
    let started = Instant::now();
    while Instant::now() < deadline {
        for (i, strategy) in strategies.iter().enumerate() {
            let text = strategy.new_tree(&mut runner).unwrap().current();
            if boitata_blueprint::parse(&text, "fuzz.yaml").is_ok() {
                valid += 1;
            }
            exercise(&text);
            counts[i] += 1;
        }
    }
    let total: u64 = counts.iter().sum();
    println!(
        "fuzzed for {:.1?}: {total} inputs ({} arbitrary byte strings, {} mutated blueprints, {} random blueprints), {valid} of them valid blueprints",
        started.elapsed(),
        counts[0],
        counts[1],
        counts[2]
    );
}
