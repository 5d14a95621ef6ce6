//! Validation: each rule, with its expected diagnostics as a snapshot (the source line
//! with a caret as miette draws it, then the one-line `file:line:col: message` forms).

use boitata_blueprint::{parse, Severity};

/// The rendered diagnostics of a blueprint that must be invalid.
fn diagnose(yaml: &str) -> String {
    match parse(yaml, "blueprint.yaml") {
        Ok(_) => panic!("expected the blueprint to be invalid:\n{yaml}"),
        Err(d) => format!("{}\n---\n{d}\n", d.render(100)),
    }
}

macro_rules! invalid {
    ($name:ident, $yaml:expr) => {
        #[test]
        fn $name() {
            insta::assert_snapshot!(stringify!($name), diagnose($yaml));
        }
    };
}

invalid!(
    yaml_syntax_error_has_line_and_column,
    "name: broken\nentry: a\nnodes:\n  a: { type: exec, command: \"true\"\n"
);

invalid!(
    duplicate_keys_name_both_lines,
    r#"name: dup
entry: a
nodes:
  a: { type: exec, command: "true" }
  b: { type: exec, command: "true", command: "false" }
  a: { type: exec, command: "false" }
edges:
  - { from: a, to: b }
"#
);

invalid!(
    alias_bomb_is_refused,
    r#"name: bomb
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
"#
);

invalid!(empty_file, "# nothing here\n");

invalid!(top_level_must_be_a_mapping, "- name: x\n- entry: y\n");

invalid!(
    missing_name_entry_and_nodes_are_reported_together,
    "description: half a blueprint\nedges: []\n"
);

invalid!(
    unknown_top_level_field_lists_the_allowed_ones,
    r#"name: extra
entry: a
max_step: 10
nodes:
  a: { type: exec, command: "true" }
"#
);

invalid!(
    bad_blueprint_name,
    r#"name: My Blueprint
entry: a
nodes:
  a: { type: exec, command: "true" }
"#
);

invalid!(
    unknown_node_type_lists_the_known_ones,
    r#"name: types
entry: a
nodes:
  a: { type: exce, command: "true" }
  b: { command: "true" }
edges:
  - { from: a, to: b }
"#
);

invalid!(
    unknown_and_missing_fields_of_a_node,
    r#"name: fields
entry: test
nodes:
  test:
    type: exec
    comand: cargo test
    retries: 3
"#
);

invalid!(
    sandbox_node_types_are_validated_too,
    r#"name: sandboxed
entry: box
nodes:
  box: { type: provision, image: "img:latest", memroy: 2g }
  code: { type: checkout, container: "{box}" }
  work: { type: agent_sandbox, prompt: "fix it", port: 70000 }
  test: { type: exec, container: "{box}", command: "make test" }
edges:
  - { from: box, to: code }
  - { from: code, to: work }
  - { from: work, to: test }
"#
);

invalid!(
    bad_field_values,
    r#"name: values
entry: a
max_steps: 0
nodes:
  a: { type: exec, command: "true", timeout: 9 parsecs }
  b: { type: exec, command: "true", max_visits: 0 }
  c: { type: provision, image: x, memory: lots, cpus: many }
  d: { type: agent, prompt: hi, max_turns: -1 }
edges:
  - { from: a, to: b }
  - { from: b, to: c }
  - { from: c, to: d }
"#
);

invalid!(
    edge_from_unknown_node_suggests_the_closest,
    r#"name: edges
entry: box
nodes:
  box: { type: exec, command: "true" }
  code: { type: exec, command: "true" }
  test: { type: exec, command: "true" }
edges:
  - { from: box, to: code }
  - { from: code, to: test }
  - { from: tset, to: END }
"#
);

invalid!(
    edge_to_unknown_node,
    r#"name: edges
entry: a
nodes:
  a: { type: exec, command: "true" }
  b: { type: exec, command: "true" }
edges:
  - { from: a, to: bb }
  - { from: a, to: b }
"#
);

invalid!(
    edge_out_of_end,
    r#"name: edges
entry: a
nodes:
  a: { type: exec, command: "true" }
edges:
  - { from: a, to: END }
  - { from: END, to: a }
"#
);

invalid!(
    bad_when,
    r#"name: whens
entry: a
nodes:
  a: { type: exec, command: "true" }
  b: { type: exec, command: "true" }
edges:
  - { from: a, when: sucess, to: b }
  - { from: a, when: 300, to: b }
  - { from: a, when: [1, 2], to: b }
"#
);

invalid!(
    malformed_edges,
    r#"name: edges
entry: a
nodes:
  a: { type: exec, command: "true" }
edges:
  - { from: a, condition: success }
  - just a string
"#
);

invalid!(
    missing_entry,
    r#"name: no-entry
nodes:
  a: { type: exec, command: "true" }
"#
);

invalid!(
    unknown_entry_suggests_the_closest,
    r#"name: entry
entry: tset
nodes:
  test: { type: exec, command: "true" }
"#
);

invalid!(
    entry_cannot_be_end,
    r#"name: entry
entry: END
nodes:
  a: { type: exec, command: "true" }
"#
);

invalid!(
    unknown_placeholders,
    r#"name: placeholders
entry: a
params:
  branch: { default: main }
nodes:
  a: { type: exec, command: "echo {tset} {params.brnch} {run.name} {task}" }
  test: { type: exec, command: "echo {a} {a b} }", env: { WHO: "{nobody}" } }
edges:
  - { from: a, to: test }
"#
);

invalid!(
    reserved_and_invalid_node_ids,
    r#"name: ids
entry: a
nodes:
  a: { type: exec, command: "true" }
  task: { type: exec, command: "true" }
  "a.b": { type: exec, command: "true" }
edges:
  - { from: a, to: task }
"#
);

invalid!(
    bad_params,
    r#"name: params
entry: a
params:
  repo: "https://example.invalid/repo.git"
  branch: { default: main, help: "the branch" }
  "bad name": {}
nodes:
  a: { type: exec, command: "true" }
"#
);

invalid!(
    every_problem_is_reported_at_once,
    r#"name: Many Problems
entry: tset
nodes:
  box: { type: provision, image: "boitata-agent-rust:latest" }
  test: { type: exec, comand: "cargo test" }
  work: { type: agnet, prompt: "make the tests pass" }
edges:
  - { from: box, to: test }
  - { from: test, when: failure, to: wrok }
  - { from: END, to: box }
"#
);

// Problems that used to hide each other: a node with a zero max_visits or an unknown
// field, and a param with an unknown field, skipped their placeholder checks, and a
// bad edge hid nothing but was reported in a first round of its own.
invalid!(
    problems_in_one_node_do_not_hide_its_placeholders,
    r#"name: trial
entry: test
params:
  test_command: { default: "make test", help: "how to run the tests" }
nodes:
  test:
    type: exec
    command: "{params.test_command} {test"
  fix:
    type: agent
    prompt: "fix {params.q} after {tset} in {run.name}, then awk '{print $1}'"
    max_visits: 0
  report:
    type: exec
    command: "echo {fix} {nobody}"
    colour: red
  notes:
    type: nope
    env: { SEEN: "{tset}" }
  box:
    type: agent_sandbox
    prompt: "{tset}"
    port: 70000
edges:
  - { from: test, when: 256, to: fix }
  - { from: fix, to: report }
  - { from: report, to: notes }
  - { from: notes, to: box }
"#
);

#[test]
fn a_placeholder_naming_a_node_the_walk_never_reaches_is_a_warning() {
    let yaml = r#"name: never
entry: a
nodes:
  a: { type: exec, command: "echo {never} {b}" }
  b: { type: exec, command: "true" }
  never: { type: exec, command: "true" }
  island: { type: exec, command: "echo {never}" }
edges:
  - { from: a, to: b }
  - { from: island, to: never }
"#;
    let validated = parse(yaml, "blueprint.yaml").unwrap();
    insta::assert_snapshot!(
        "a_placeholder_naming_a_node_the_walk_never_reaches_is_a_warning",
        format!(
            "{}\n---\n{}\n",
            validated.warnings.render(100),
            validated.warnings
        )
    );
}

#[test]
fn unreachable_nodes_are_warnings_not_errors() {
    let yaml = r#"name: island
entry: a
nodes:
  a: { type: exec, command: "true" }
  b: { type: exec, command: "true" }
  c: { type: exec, command: "true" }
edges:
  - { from: a, to: END }
  - { from: b, to: c }
"#;
    let validated = parse(yaml, "blueprint.yaml").unwrap();
    assert!(validated
        .warnings
        .problems()
        .iter()
        .all(|p| p.severity() == Severity::Warning));
    insta::assert_snapshot!(
        "unreachable_nodes_are_warnings_not_errors",
        format!(
            "{}\n---\n{}\n",
            validated.warnings.render(100),
            validated.warnings
        )
    );
}

#[test]
fn a_valid_blueprint_becomes_the_model() {
    use boitata_blueprint::{NodeSpec, When};
    let yaml = r#"name: containerized_agent
description: the seed
entry: box
params:
  repo: { description: "the repository" }
  branch: { default: main }
max_steps: 20
nodes:
  box:   { type: provision, image: "boitata-agent-rust:latest", memory: 2g, cpus: 1.5, pids: 256 }
  code:  { type: checkout, container: "{box}", repo: "{params.repo}", ref: "{params.branch}" }
  test:  { type: exec, container: "{box}", command: "cargo test", timeout: 10m, max_visits: 3, env: { RUST_LOG: 1 } }
  work:  { type: agent_sandbox, container: "{box}", prompt: "make the tests pass", max_turns: 5 }
edges:
  - { from: box, to: code }
  - { from: code, when: success, to: test }
  - { from: test, when: 0, to: END }
  - { from: test, when: failure, to: work }
  - { from: work, to: test }
"#;
    let validated = parse(yaml, "seed.yaml").unwrap();
    assert!(validated.warnings.is_empty(), "{}", validated.warnings);
    let bp = validated.blueprint;
    assert_eq!(bp.name, "containerized_agent");
    assert_eq!(bp.max_steps, 20);
    assert_eq!(bp.params["branch"].default.as_deref(), Some("main"));
    assert_eq!(bp.params["repo"].default, None);
    assert_eq!(
        bp.node_ids().collect::<Vec<_>>(),
        ["box", "code", "test", "work"]
    );
    let NodeSpec::Provision(p) = &bp.node("box").unwrap().spec else {
        panic!()
    };
    assert_eq!(p.memory_bytes, Some(2 << 30));
    assert_eq!(p.cpus, Some(1.5));
    let test = bp.node("test").unwrap();
    assert_eq!(test.max_visits, 3);
    assert_eq!(test.timeout, Some(std::time::Duration::from_secs(600)));
    assert_eq!(test.env["RUST_LOG"], "1");
    let NodeSpec::Checkout(c) = &bp.node("code").unwrap().spec else {
        panic!()
    };
    assert_eq!(c.git_ref.as_deref(), Some("{params.branch}"));
    let whens: Vec<When> = bp.edges.iter().map(|e| e.when).collect();
    assert_eq!(
        whens,
        [
            When::Always,
            When::Success,
            When::ExitCode(0),
            When::Failure,
            When::Always
        ]
    );
}

#[test]
fn the_example_blueprints_are_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/blueprints");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        match parse(&text, &path.display().to_string()) {
            Ok(v) => assert!(v.warnings.is_empty(), "{}", v.warnings),
            Err(d) => panic!("{}", d.render(100)),
        }
        seen += 1;
    }
    assert!(
        seen >= 2,
        "expected the example blueprints in {}",
        dir.display()
    );
}

#[test]
fn oversized_input_is_refused_before_parsing() {
    let mut yaml = String::from("name: big\ndescription: \"");
    yaml.push_str(&"x".repeat(boitata_blueprint::MAX_BLUEPRINT_BYTES));
    yaml.push_str("\"\n");
    let d = parse(&yaml, "big.yaml").unwrap_err();
    assert!(d.to_string().contains("limited to"), "{d}");
}

invalid!(
    provision_settings_that_would_fail_or_weaken_limits,
    r#"name: limits
entry: box
nodes:
  box: { type: provision, image: "", network: host, cpus: 0.0000000001, pids: 0, memory: 1k, workdir: relative }
  neg: { type: provision, image: img, cpus: -1 }
  zero: { type: provision, image: img, cpus: 0, network: "{params.net}", workdir: "{params.dir}" }
  work: { type: agent_sandbox, container: "{box}", prompt: hi, max_turns: 0 }
  host: { type: agent, prompt: hi, max_turns: 0 }
params:
  net: { default: none }
  dir: { default: /w }
edges:
  - { from: box, to: neg }
  - { from: neg, to: zero }
  - { from: zero, to: work }
  - { from: work, to: host }
"#
);

invalid!(
    egress_policies_that_open_everything_or_mean_nothing_are_refused,
    r#"name: egress
entry: any
nodes:
  any: { type: provision, image: img, egress: allow, allow: ["*", "pypi.org"] }
  world: { type: provision, image: img, egress: allow, allow: ["0.0.0.0/0:443"] }
  halves: { type: provision, image: img, egress: allow, allow: ["0.0.0.0/1", "128.0.0.0/1", "*.com", "10.0.0.0/8"] }
  empty: { type: provision, image: img, egress: allow }
  stray: { type: provision, image: img, allow: ["pypi.org"], allow_all: true }
  bad: { type: provision, image: img, egress: allow, allow: ["a.*.org", "host:0", "10.0.0.0/33"] }
  wrong: { type: provision, image: img, egress: everywhere }
  bridged: { type: provision, image: img, network: bridge, egress: gateway }
edges:
  - { from: any, to: world }
  - { from: world, to: halves }
  - { from: halves, to: empty }
  - { from: empty, to: stray }
  - { from: stray, to: bad }
  - { from: bad, to: wrong }
  - { from: wrong, to: bridged }
"#
);

#[test]
fn egress_policies_that_say_what_they_mean_are_valid() {
    let yaml = r#"name: egress
entry: index
nodes:
  index: { type: provision, image: img, egress: allow, allow: ["*.pypi.org", "files.pythonhosted.org", "127.0.0.1:8080", "10.0.0.0/8", "[fd00::1]:53"] }
  open: { type: provision, image: img, egress: allow, allow: ["*"], allow_all: true }
  all: { type: provision, image: img, egress: allow, allow_all: true }
  closed: { type: provision, image: img, egress: none }
  model: { type: provision, image: img, network: run, egress: gateway }
edges:
  - { from: index, to: open }
  - { from: open, to: all }
  - { from: all, to: closed }
  - { from: closed, to: model }
"#;
    if let Err(d) = parse(yaml, "egress.yaml") {
        panic!("{}", d.render(100));
    }
}

/// `egress: none` off the run network was valid here and refused by the provision
/// node at run time (a run started from a blueprint that `validate` passed, then
/// failed): both now say the same.
#[test]
fn egress_none_off_the_run_network_is_refused_before_the_run() {
    for network in ["bridge", "none"] {
        let yaml = format!(
            "name: n\nentry: box\nnodes:\n  box: {{ type: provision, image: img, network: {network}, egress: none }}\n"
        );
        let diagnostics = match parse(&yaml, "blueprint.yaml") {
            Ok(_) => panic!("network: {network} with egress: none was accepted"),
            Err(d) => d,
        };
        let errors: Vec<String> = diagnostics.errors().map(|p| p.one_line()).collect();
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].contains(&format!(
                "egress applies to the run's own network, not to network {network}"
            )),
            "{errors:#?}"
        );
    }
}

#[test]
fn the_smallest_allowed_provision_settings_are_valid() {
    let yaml = r#"name: small
entry: box
nodes:
  box: { type: provision, image: img, network: none, cpus: 0.01, pids: 1, memory: 6m, workdir: /w }
  net: { type: provision, image: img, network: bridge }
  work: { type: agent, prompt: hi, max_turns: 1 }
edges:
  - { from: box, to: net }
  - { from: net, to: work }
"#;
    if let Err(d) = parse(yaml, "small.yaml") {
        panic!("{}", d.render(100));
    }
}

/// A string field given a plain number: one error, quoting the number as written (not
/// `3.1`), and no second "image is empty" for the value it could not take.
#[test]
fn a_string_field_given_a_number_quotes_it_as_written_in_one_error() {
    for (written, kind) in [
        ("3.10", "a number"),
        ("007", "a number"),
        ("42", "an integer"),
        ("1e3", "a number"),
    ] {
        let yaml = format!(
            "name: n\nentry: box\nnodes:\n  box: {{ type: provision, image: {written} }}\nedges:\n  - {{ from: box, to: END }}\n"
        );
        let diagnostics = match parse(&yaml, "blueprint.yaml") {
            Ok(_) => panic!("image: {written} was accepted"),
            Err(d) => d,
        };
        let errors: Vec<String> = diagnostics.errors().map(|p| p.one_line()).collect();
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].contains(&format!(
                "expected a string, found {kind} written as {written}: put it in quotes (\"{written}\")"
            )),
            "{errors:#?}"
        );
        assert!(errors[0].contains("field \"image\""), "{errors:#?}");
    }
}

#[test]
fn a_budget_is_read_into_the_model() {
    let yaml = r#"name: budgeted
entry: a
budget: { tokens: 120000, requests: 40, wall: 30m }
nodes:
  a: { type: agent, prompt: hi }
edges: []
"#;
    let blueprint = parse(yaml, "budgeted.yaml").unwrap().blueprint;
    let budget = blueprint.budget.unwrap();
    assert_eq!(budget.tokens, Some(120_000));
    assert_eq!(budget.requests, Some(40));
    assert_eq!(budget.wall, Some(std::time::Duration::from_secs(1800)));
    let none = parse(
        "name: free\nentry: a\nnodes:\n  a: { type: agent, prompt: hi }\n",
        "free.yaml",
    )
    .unwrap();
    assert!(none.blueprint.budget.is_none());
}

invalid!(
    budget_fields_are_known_fields,
    r#"name: budgets
entry: a
budget: { tokens: 5, dollars: 5 }
nodes:
  a: { type: agent, prompt: hi }
"#
);

invalid!(
    a_zero_budget_is_refused,
    r#"name: budgets
entry: a
budget: { tokens: 0, wall: 0s }
nodes:
  a: { type: agent, prompt: hi }
"#
);
