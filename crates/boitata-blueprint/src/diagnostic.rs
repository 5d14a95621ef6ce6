//! Validation diagnostics: each problem with its file, line, column and source line.
//!
//! A [`Problem`] is a [`miette::Diagnostic`] carrying the blueprint's source, so a
//! graphical handler shows the line with a caret under the fault; [`Diagnostics`]
//! holds every problem found in one file. [`Diagnostics::render`] draws them all
//! (no colour, for logs and tests); its `Display` is one `file:line:col: message`
//! line per problem.

use std::fmt;
use std::sync::Arc;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode};

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The blueprint cannot run.
    Error,
    /// The blueprint runs, but probably not as meant (an unreachable node).
    Warning,
}

/// Where a problem is, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// The line.
    pub line: usize,
    /// The column, in characters.
    pub column: usize,
    /// The byte offset in the file.
    pub offset: usize,
    /// The length of the text at fault, in bytes.
    pub len: usize,
}

/// One problem in a blueprint file.
#[derive(Clone)]
pub struct Problem {
    severity: Severity,
    message: String,
    help: Option<String>,
    location: Option<Location>,
    label: String,
    related: Vec<(Location, String)>,
    source: Arc<NamedSource<String>>,
    file: String,
}

impl fmt::Debug for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Problem")
            .field("severity", &self.severity)
            .field("message", &self.message)
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Problem {
    /// Error or warning.
    pub fn severity(&self) -> Severity {
        self.severity
    }

    /// What is wrong and how to fix it (lower-case, names the node or edge).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Where, if the problem has a place in the file.
    pub fn location(&self) -> Option<Location> {
        self.location
    }

    /// The file name it was read from.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// `file:line:col: message` (with `warning: ` before warnings).
    pub fn one_line(&self) -> String {
        let prefix = match self.severity {
            Severity::Error => "",
            Severity::Warning => "warning: ",
        };
        let mut line = match self.location {
            Some(l) => format!(
                "{}:{}:{}: {prefix}{}",
                self.file, l.line, l.column, self.message
            ),
            None => format!("{}: {prefix}{}", self.file, self.message),
        };
        if let Some(help) = &self.help {
            line.push_str(" (");
            line.push_str(help);
            line.push(')');
        }
        line
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

impl miette::Diagnostic for Problem {
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h.as_str()) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.location.map(|_| &*self.source as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let primary = self.location?;
        let mut labels = vec![LabeledSpan::new_primary_with_span(
            Some(self.label.clone()),
            (primary.offset, primary.len),
        )];
        for (location, label) in &self.related {
            labels.push(LabeledSpan::new_with_span(
                Some(label.clone()),
                (location.offset, location.len),
            ));
        }
        Some(Box::new(labels.into_iter()))
    }
}

/// Every problem found in one blueprint file, errors and warnings, in file order.
#[derive(Clone)]
pub struct Diagnostics {
    file: String,
    problems: Vec<Problem>,
}

impl fmt::Debug for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Diagnostics")
            .field("file", &self.file)
            .field("problems", &self.problems)
            .finish()
    }
}

impl Diagnostics {
    /// The file name the problems refer to.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Every problem, in file order.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Warning)
    }

    /// True when there is at least one error.
    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }

    /// True when there is nothing to report.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// Draws every problem with its source line and a caret, without colour, `width`
    /// columns wide.
    pub fn render(&self, width: usize) -> String {
        let handler = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
            .with_width(width)
            .with_links(false);
        self.render_with(&handler)
    }

    /// Draws every problem with `handler` (e.g. one with colours for a terminal).
    pub fn render_with(&self, handler: &GraphicalReportHandler) -> String {
        let mut out = String::new();
        for problem in &self.problems {
            if handler.render_report(&mut out, problem).is_err() {
                out.push_str(&problem.one_line());
                out.push('\n');
            }
        }
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(&problem.one_line())?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

impl miette::Diagnostic for Diagnostics {
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        Some(Box::new(
            self.problems.iter().map(|p| p as &dyn miette::Diagnostic),
        ))
    }
}

/// Collects problems for one file, then sorts them into [`Diagnostics`].
pub(crate) struct Collector {
    file: String,
    source: Arc<NamedSource<String>>,
    text: Arc<str>,
    problems: Vec<Problem>,
}

/// A byte range for a problem: `(offset, len)`.
pub(crate) type At = Option<crate::yaml::Span>;

impl Collector {
    pub(crate) fn new(file: &str, text: &str) -> Self {
        Collector {
            file: file.to_owned(),
            source: Arc::new(NamedSource::new(file, text.to_owned()).with_language("yaml")),
            text: Arc::from(text),
            problems: Vec::new(),
        }
    }

    fn locate(&self, at: At) -> Option<Location> {
        let span = at?;
        let offset = span.offset.min(self.text.len());
        let before = self.text.get(..offset)?;
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Some(Location {
            line,
            column,
            offset,
            len: span.len.min(self.text.len() - offset),
        })
    }

    /// Records an error at `at`, labelled `label`.
    pub(crate) fn error(&mut self, at: At, label: &str, message: impl Into<String>) {
        self.push(Severity::Error, at, label, message.into());
    }

    /// Records a warning at `at`, labelled `label`.
    pub(crate) fn warning(&mut self, at: At, label: &str, message: impl Into<String>) {
        self.push(Severity::Warning, at, label, message.into());
    }

    fn push(&mut self, severity: Severity, at: At, label: &str, message: String) {
        let location = self.locate(at);
        let problem = Problem {
            severity,
            message,
            help: None,
            location,
            label: label.to_owned(),
            related: Vec::new(),
            source: self.source.clone(),
            file: self.file.clone(),
        };
        self.problems.push(problem);
    }

    /// Adds a secondary label at `at` to the last problem.
    pub(crate) fn also(&mut self, at: At, label: &str) {
        let location = self.locate(at);
        if let (Some(location), Some(problem)) = (location, self.problems.last_mut()) {
            problem.related.push((location, label.to_owned()));
        }
    }

    /// The line of byte offset `at`, 1-based.
    pub(crate) fn line_of(&self, at: At) -> Option<usize> {
        self.locate(at).map(|l| l.line)
    }

    pub(crate) fn has_errors(&self) -> bool {
        self.problems.iter().any(|p| p.severity == Severity::Error)
    }

    pub(crate) fn finish(mut self) -> Diagnostics {
        self.problems
            .sort_by_key(|p| p.location.map_or(0, |l| l.offset));
        Diagnostics {
            file: self.file,
            problems: self.problems,
        }
    }
}
