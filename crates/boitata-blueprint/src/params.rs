//! Param values for a run: the blueprint's declared params, their defaults, and the
//! values the run sets (`--param NAME=VALUE`).

use std::collections::BTreeMap;
use std::fmt;

use crate::model::Blueprint;

/// One problem with the params a run was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamProblem {
    /// A declared param without a default was not set.
    Missing {
        /// The param.
        name: String,
        /// Its description, if it has one.
        description: Option<String>,
    },
    /// A value was given for a param the blueprint does not declare.
    Undeclared {
        /// The name given.
        name: String,
        /// The declared params.
        declared: Vec<String>,
    },
}

impl fmt::Display for ParamProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamProblem::Missing { name, description } => {
                write!(
                    f,
                    "param {name:?} is required: set it with --param {name}=VALUE"
                )?;
                if let Some(description) = description {
                    write!(f, " ({description})")?;
                }
                Ok(())
            }
            ParamProblem::Undeclared { name, declared } if declared.is_empty() => write!(
                f,
                "param {name:?} is not declared: this blueprint takes no params"
            ),
            ParamProblem::Undeclared { name, declared } => write!(
                f,
                "param {name:?} is not declared (params: {}){}",
                declared.join(", "),
                crate::suggest::did_you_mean(name, declared.iter().map(String::as_str))
            ),
        }
    }
}

/// Every problem with a run's params, reported together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ParamError {
    /// The blueprint.
    pub blueprint: String,
    /// The problems, in param-name order.
    pub problems: Vec<ParamProblem>,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blueprint {:?}: ", self.blueprint)?;
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}

/// Applies defaults to `given` and checks it against the declared params.
///
/// # Errors
/// [`ParamError`] listing every required param left unset and every undeclared one set.
pub fn resolve(
    blueprint: &Blueprint,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ParamError> {
    let mut problems = Vec::new();
    let declared: Vec<String> = blueprint.params.keys().cloned().collect();
    for name in given.keys() {
        if !blueprint.params.contains_key(name) {
            problems.push(ParamProblem::Undeclared {
                name: name.clone(),
                declared: declared.clone(),
            });
        }
    }
    let mut values = BTreeMap::new();
    for (name, param) in &blueprint.params {
        match given.get(name).or(param.default.as_ref()) {
            Some(value) => {
                values.insert(name.clone(), value.clone());
            }
            None => problems.push(ParamProblem::Missing {
                name: name.clone(),
                description: param.description.clone(),
            }),
        }
    }
    if problems.is_empty() {
        Ok(values)
    } else {
        Err(ParamError {
            blueprint: blueprint.name.clone(),
            problems,
        })
    }
}

/// The names set more than once in `assignments` (`NAME=VALUE` pairs as given to
/// `--param`), each with how many times, in name order. A run should refuse these
/// rather than pick one of the values.
pub fn repeated(assignments: &[(String, String)]) -> Vec<(String, usize)> {
    let mut times: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, _) in assignments {
        *times.entry(name.as_str()).or_default() += 1;
    }
    times
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(name, n)| (name.to_owned(), n))
        .collect()
}

/// Parses `NAME=VALUE` (as given to `--param`).
///
/// # Errors
/// A message saying what is wrong when there is no `=` or the name is empty.
pub fn parse_assignment(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!("invalid param {text:?}: write NAME=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_param_set_twice_is_found() {
        let pair = |n: &str, v: &str| (n.to_owned(), v.to_owned());
        let given = [pair("repo", "a"), pair("ref", "x"), pair("repo", "b")];
        assert_eq!(repeated(&given), [("repo".to_owned(), 2)]);
        assert!(repeated(&given[..2]).is_empty());
    }
}
