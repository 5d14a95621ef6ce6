//! `{placeholder}` templating of node fields.
//!
//! A template is text with placeholders in braces:
//!
//! | placeholder      | becomes                                                     |
//! |------------------|-------------------------------------------------------------|
//! | `{task}`         | the run's task string                                       |
//! | `{run.id}`       | the run's id                                                |
//! | `{params.NAME}`  | the param's value (`--param NAME=VALUE`, else its default)  |
//! | `{NODE}`         | the output of node `NODE`'s latest visit, trailing newlines removed |
//!
//! `{{` and `}}` are literal braces. Validation checks every name against the
//! blueprint ([`parse`] and [`Reference`]); rendering ([`render`]) fails when a node
//! refers to a node that has not run yet.
//!
//! ```
//! use std::collections::{BTreeMap, HashMap};
//! use boitata_blueprint::template::{render, Scope};
//!
//! let params = BTreeMap::from([("branch".to_owned(), "main".to_owned())]);
//! let outputs = HashMap::from([("box".to_owned(), "c0ffee\n".to_owned())]);
//! let scope = Scope { task: "fix it", run_id: "r1", params: &params, outputs: &outputs };
//! let text = render("git -C {box} checkout {params.branch} # {{literal}}", "code", &scope).unwrap();
//! assert_eq!(text, "git -C c0ffee checkout main # {literal}");
//! ```

use std::collections::{BTreeMap, HashMap};

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text copied as is (escapes already resolved).
    Text(String),
    /// A placeholder.
    Placeholder(Placeholder),
}

/// A `{name}` in a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// What it refers to.
    pub reference: Reference,
    /// The byte offset of its `{` in the template.
    pub offset: usize,
    /// Its length in bytes, braces included.
    pub len: usize,
}

/// What a placeholder refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// `{task}`.
    Task,
    /// `{run.id}`.
    RunId,
    /// `{params.NAME}`.
    Param(String),
    /// `{NODE}`.
    Node(String),
    /// `{something.else}`: a dotted name that is neither `run.id` nor `params.*`.
    Unknown(String),
}

impl Reference {
    fn classify(name: &str) -> Reference {
        if name == "task" {
            Reference::Task
        } else if name == "run.id" {
            Reference::RunId
        } else if let Some(param) = name.strip_prefix("params.") {
            Reference::Param(param.to_owned())
        } else if name.contains('.') {
            Reference::Unknown(name.to_owned())
        } else {
            Reference::Node(name.to_owned())
        }
    }

    /// The placeholder as written, braces included.
    pub fn placeholder(&self) -> String {
        match self {
            Reference::Task => "{task}".to_owned(),
            Reference::RunId => "{run.id}".to_owned(),
            Reference::Param(name) => format!("{{params.{name}}}"),
            Reference::Node(name) | Reference::Unknown(name) => format!("{{{name}}}"),
        }
    }
}

/// A template that is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    /// What is wrong and how to fix it.
    pub message: String,
    /// The byte offset of the offending text in the template.
    pub offset: usize,
    /// Its length in bytes.
    pub len: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Splits `text` into literal text and placeholders.
///
/// # Errors
/// Every [`SyntaxError`] in `text`: an unclosed `{`, a lone `}`, a name with
/// characters other than letters, digits, `_`, `-` and `.`.
pub fn parse(text: &str) -> Result<Vec<Piece>, Vec<SyntaxError>> {
    let (pieces, errors) = scan(text);
    if errors.is_empty() {
        Ok(pieces)
    } else {
        Err(errors)
    }
}

/// Like [`parse`], but returns the well-formed pieces together with the errors.
pub(crate) fn scan(text: &str) -> (Vec<Piece>, Vec<SyntaxError>) {
    let mut pieces = Vec::new();
    let mut errors = Vec::new();
    let mut literal = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if text[i + 1..].starts_with('{') => {
                chars.next();
                literal.push('{');
            }
            '}' if text[i + 1..].starts_with('}') => {
                chars.next();
                literal.push('}');
            }
            '}' => {
                errors.push(SyntaxError {
                    message: "lone `}`: write `}}` for a literal brace".to_owned(),
                    offset: i,
                    len: 1,
                });
            }
            '{' => {
                let Some(close) = text[i + 1..].find('}') else {
                    errors.push(SyntaxError {
                        message: "unclosed `{`: close the placeholder with `}`, or write `{{` for a literal brace".to_owned(),
                        offset: i,
                        len: 1,
                    });
                    break;
                };
                let name = &text[i + 1..i + 1 + close];
                let len = close + 2;
                // Skip the name and the closing brace.
                while chars.peek().is_some_and(|(j, _)| *j < i + len) {
                    chars.next();
                }
                if name.is_empty() || !name.chars().all(is_name_char) {
                    errors.push(SyntaxError {
                        message: format!(
                            "`{{{name}}}` is not a placeholder (names use letters, digits, `_`, `-` and `.`): write `{{{{` and `}}}}` for literal braces"
                        ),
                        offset: i,
                        len,
                    });
                    continue;
                }
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Placeholder(Placeholder {
                    reference: Reference::classify(name),
                    offset: i,
                    len,
                }));
            }
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Text(literal));
    }
    (pieces, errors)
}

/// What placeholders are replaced with.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The run's task.
    pub task: &'a str,
    /// The run's id.
    pub run_id: &'a str,
    /// Every param's value (defaults applied).
    pub params: &'a BTreeMap<String, String>,
    /// The output of each node that has run (its latest visit).
    pub outputs: &'a HashMap<String, String>,
}

/// A template could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// `{NODE}` names a node that has not run yet.
    #[error("node {node:?} uses {{{referenced}}}, but node {referenced:?} has not run yet: route the walk through {referenced:?} before {node:?}, or remove the placeholder")]
    NodeNotRun {
        /// The node being rendered.
        node: String,
        /// The node it refers to.
        referenced: String,
    },
    /// `{params.NAME}` names no param with a value.
    #[error("node {node:?} uses {{params.{param}}}, but no param {param:?} is set: declare it under params:")]
    ParamNotSet {
        /// The node being rendered.
        node: String,
        /// The param.
        param: String,
    },
    /// A name that is neither a node nor a known placeholder.
    #[error("node {node:?} uses unknown placeholder {placeholder}")]
    Unknown {
        /// The node being rendered.
        node: String,
        /// The placeholder as written.
        placeholder: String,
    },
    /// The template is not well formed.
    #[error("node {node:?}: {error}")]
    Syntax {
        /// The node being rendered.
        node: String,
        /// The first syntax error.
        error: SyntaxError,
    },
}

/// Renders `text` for node `node` (named in errors).
///
/// # Errors
/// [`RenderError`]: a node that has not run, an unset param, an unknown name, bad
/// syntax.
pub fn render(text: &str, node: &str, scope: &Scope<'_>) -> Result<String, RenderError> {
    let pieces = parse(text).map_err(|mut errors| RenderError::Syntax {
        node: node.to_owned(),
        error: errors.remove(0),
    })?;
    let mut out = String::with_capacity(text.len());
    for piece in pieces {
        match piece {
            Piece::Text(t) => out.push_str(&t),
            Piece::Placeholder(p) => match p.reference {
                Reference::Task => out.push_str(scope.task),
                Reference::RunId => out.push_str(scope.run_id),
                Reference::Param(name) => match scope.params.get(&name) {
                    Some(value) => out.push_str(value),
                    None => {
                        return Err(RenderError::ParamNotSet {
                            node: node.to_owned(),
                            param: name,
                        })
                    }
                },
                Reference::Node(name) => match scope.outputs.get(&name) {
                    Some(output) => out.push_str(output.trim_end_matches(['\n', '\r'])),
                    None => {
                        return Err(RenderError::NodeNotRun {
                            node: node.to_owned(),
                            referenced: name,
                        })
                    }
                },
                Reference::Unknown(name) => {
                    return Err(RenderError::Unknown {
                        node: node.to_owned(),
                        placeholder: format!("{{{name}}}"),
                    })
                }
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_placeholders_parse() {
        let pieces = parse("a {{b}} {task}{x}").unwrap();
        assert_eq!(
            pieces,
            vec![
                Piece::Text("a {b} ".into()),
                Piece::Placeholder(Placeholder {
                    reference: Reference::Task,
                    offset: 8,
                    len: 6
                }),
                Piece::Placeholder(Placeholder {
                    reference: Reference::Node("x".into()),
                    offset: 14,
                    len: 3
                }),
            ]
        );
    }

    #[test]
    fn every_syntax_error_is_reported() {
        let errors = parse("} {a b} {ok} {").unwrap_err();
        let offsets: Vec<usize> = errors.iter().map(|e| e.offset).collect();
        assert_eq!(offsets, vec![0, 2, 13]);
    }

    #[test]
    fn multibyte_text_survives() {
        let params = BTreeMap::new();
        let outputs = HashMap::new();
        let scope = Scope {
            task: "é",
            run_id: "r",
            params: &params,
            outputs: &outputs,
        };
        assert_eq!(render("ü{task}ß{{", "n", &scope).unwrap(), "üéß{");
    }
}
