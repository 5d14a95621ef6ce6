//! A blueprint as a Mermaid flowchart (`boitata blueprint graph FILE`).
//!
//! Each node is a box labelled `ID: TYPE`; a `start` circle points at the entry; each
//! edge is an arrow labelled with its `when` (`success`, `failure`, an exit code; no
//! label when it is always taken); `END` is a rounded box.
//!
//! ```
//! let yaml = "name: g\nentry: test\nnodes:\n  test: { type: exec, command: make }\nedges:\n  - { from: test, when: success, to: END }\n";
//! let blueprint = boitata_blueprint::parse(yaml, "g.yaml").unwrap().blueprint;
//! let chart = boitata_blueprint::graph::mermaid(&blueprint);
//! assert!(chart.contains("n0 -->|success| finish"));
//! ```

use std::fmt::Write;

use crate::model::{Blueprint, When, END};

/// The Mermaid `flowchart TD` text of `blueprint`, one statement per line.
pub fn mermaid(blueprint: &Blueprint) -> String {
    let id = |node: &str| -> String {
        if node == END {
            return "finish".to_owned();
        }
        match blueprint.nodes.iter().position(|n| n.id == node) {
            Some(i) => format!("n{i}"),
            None => "unknown".to_owned(),
        }
    };
    let mut out = String::from("flowchart TD\n");
    let _ = writeln!(out, "    start((start))");
    for (i, node) in blueprint.nodes.iter().enumerate() {
        let _ = writeln!(
            out,
            "    n{i}[\"{}: {}\"]",
            escape(&node.id),
            node.node_type()
        );
    }
    if blueprint.edges.iter().any(|e| e.to == END) {
        let _ = writeln!(out, "    finish([\"END\"])");
    }
    let _ = writeln!(out, "    start --> {}", id(&blueprint.entry));
    for edge in &blueprint.edges {
        match edge.when {
            When::Always => {
                let _ = writeln!(out, "    {} --> {}", id(&edge.from), id(&edge.to));
            }
            when => {
                let _ = writeln!(out, "    {} -->|{when}| {}", id(&edge.from), id(&edge.to));
            }
        }
    }
    out
}

/// Escapes text for a quoted Mermaid label.
fn escape(text: &str) -> String {
    text.replace('"', "#quot;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}
