//! Showing events: human progress on stderr (with a spinner naming the current tool
//! call when stderr is a terminal), or one JSON event per line on stdout.
//!
//! A command's output arrives in chunks that need not end at a line break; each
//! node's stdout and stderr are shown line by line, a partial line kept until the
//! rest arrives, or until the node or the run finishes.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use boitata_core::event::SinkError;
use boitata_core::{Event, EventPayload, EventSink, Outcome, OutputStream, RunStatus};
use indicatif::{ProgressBar, ProgressStyle};

use crate::terminal;

/// Prints events as they happen.
pub(crate) struct Renderer {
    json: bool,
    to_stdout: bool,
    spinner: Option<ProgressBar>,
    state: Mutex<Option<chrono::DateTime<chrono::Utc>>>,
    partial: Mutex<Vec<PartialLine>>,
}

/// The text after the last line break of one node's stdout or stderr, not shown yet.
struct PartialLine {
    node: Option<String>,
    stream: OutputStream,
    text: String,
}

/// How many characters of a node's `detail` (its command or prompt) are shown.
const DETAIL_CHARS: usize = 120;

impl Renderer {
    pub(crate) fn new(json: bool) -> Self {
        let spinner = (!json && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(100));
            bar.set_message("starting");
            bar
        });
        Renderer {
            json,
            to_stdout: false,
            spinner,
            state: Mutex::new(None),
            partial: Mutex::new(Vec::new()),
        }
    }

    /// A human renderer that writes to stdout, with no spinner (for `runs show`).
    pub(crate) fn to_stdout() -> Self {
        Renderer {
            json: false,
            to_stdout: true,
            spinner: None,
            state: Mutex::new(None),
            partial: Mutex::new(Vec::new()),
        }
    }

    /// Prints `text` as one line, without the escape sequences and control
    /// characters it may carry (model text, command output: see [`terminal::safe`]).
    fn line(&self, text: &str) {
        self.line_raw(&terminal::safe(text));
    }

    /// Prints `text`, which must be free of untrusted escape sequences.
    fn line_raw(&self, text: &str) {
        match &self.spinner {
            Some(bar) => bar.println(text),
            None if self.to_stdout => {
                let _ = writeln!(std::io::stdout(), "{text}");
            }
            None => {
                let _ = writeln!(std::io::stderr(), "{text}");
            }
        }
    }

    fn status(&self, text: impl Into<String>) {
        if let Some(bar) = &self.spinner {
            bar.set_message(terminal::safe(&text.into()).into_owned());
        }
    }

    /// A one-off note on stderr (also in `--json` mode, where stdout is for events).
    pub(crate) fn note(&self, text: &str) {
        self.line(&format!("note: {text}"));
    }

    /// Shows what is left of any command's output, and stops the spinner.
    pub(crate) fn finish(&self) {
        self.flush_output(|_| true);
        if let Some(bar) = &self.spinner {
            bar.finish_and_clear();
        }
    }

    /// The run's result on stdout (not in `--json` mode); without escape sequences
    /// when stdout is a terminal, exact when it is piped.
    pub(crate) fn print_result(&self, text: &str) {
        if !self.json && !text.is_empty() {
            let mut out = std::io::stdout().lock();
            let text = if out.is_terminal() {
                terminal::safe(text)
            } else {
                text.into()
            };
            let _ = writeln!(out, "{}", text.trim_end());
            let _ = out.flush();
        }
    }

    fn human(&self, event: &Event, started: Option<chrono::DateTime<chrono::Utc>>) {
        let node = event.node.as_deref();
        match &event.payload {
            EventPayload::RunStarted {
                blueprint,
                provider,
                model,
                ..
            } => {
                let what = match blueprint {
                    Some(b) => format!("blueprint {b}"),
                    None => "agent".to_owned(),
                };
                self.line(&format!("● run {} started ({what})", event.run_id));
                if let Some(provider) = provider {
                    let model = model.as_deref().unwrap_or("-");
                    self.line(&format!("  provider {provider}, model {model}"));
                    if provider == "scripted" {
                        self.line("  note: scripted provider: replaying a recorded script of model turns; no model is called");
                    }
                }
                self.status("thinking");
            }
            EventPayload::NodeStarted { node_type, detail } => {
                let name = node.unwrap_or("?");
                self.line(&format!("▶ {name} ({node_type})"));
                if let Some(detail) = detail {
                    self.detail(node_type, detail);
                }
                self.status(format!("{name}: running"));
            }
            EventPayload::NodeFinished {
                outcome,
                exit_code,
                error,
                ..
            } => {
                self.flush_output(|partial| partial.node.as_deref() == node);
                let name = node.unwrap_or("?");
                let mark = if *outcome == Outcome::Success {
                    "✓"
                } else {
                    "✗"
                };
                let word = if *outcome == Outcome::Success {
                    "succeeded"
                } else {
                    "failed"
                };
                let code = exit_code
                    .map(|c| format!(" (exit {c})"))
                    .unwrap_or_default();
                let why = error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default();
                self.line(&format!("{mark} {name} {word}{code}{why}"));
            }
            EventPayload::SandboxProvisioned {
                sandbox_id,
                backend,
                image,
                network,
            } => {
                let short: String = sandbox_id.chars().take(12).collect();
                self.line(&format!("  sandbox {short} ready ({backend}, {image})"));
                if network.as_deref() == Some("bridge") {
                    self.line(
                        "  ⚠ network bridge: not isolated (other runs' sandboxes and host services can be reached)",
                    );
                }
            }
            EventPayload::SandboxDestroyed { sandbox_id } => {
                let short: String = sandbox_id.chars().take(12).collect();
                self.line(&format!("  sandbox {short} destroyed"));
            }
            EventPayload::ExecOutput { stream, chunk } => {
                self.output(node, *stream, chunk);
            }
            EventPayload::AgentMessage { text } => {
                let mut lines = text.trim().lines();
                if let Some(first) = lines.next() {
                    self.line(&format!("  agent: {first}"));
                }
                for l in lines {
                    self.line(&format!("         {l}"));
                }
                self.status("thinking");
            }
            EventPayload::ToolCall {
                tool, arguments, ..
            } => {
                let summary = boitata_tools::tool::call_summary(tool, arguments);
                self.line(&format!("  → {tool} {summary}"));
                self.status(format!("{tool} {summary}"));
            }
            EventPayload::ToolResult { ok, output, .. } => {
                let first = output.lines().next().unwrap_or("");
                let first: String = first.chars().take(120).collect();
                let exit = output
                    .rsplit_once("[exit code: ")
                    .and_then(|(_, rest)| rest.strip_suffix(']'))
                    .and_then(|code| code.parse::<i64>().ok())
                    .filter(|code| *code != 0);
                if let Some(code) = exit {
                    self.line(&format!("    ⚠ exit {code} ({} bytes)", output.len()));
                } else if *ok {
                    self.line(&format!("    ✓ {} bytes", output.len()));
                } else {
                    self.line(&format!("    ✗ {first}"));
                }
                self.status("thinking");
            }
            EventPayload::Usage { .. } => {}
            EventPayload::Note { message } => self.line(&format!("  note: {message}")),
            EventPayload::Egress {
                host,
                port,
                allowed,
                reason,
                ..
            } => {
                let mark = if *allowed { "egress" } else { "egress denied" };
                self.line(&format!("  {mark} {host}:{port} ({reason})"));
            }
            EventPayload::BudgetExceeded { message, .. } => {
                self.flush_output(|_| true);
                self.line(&format!("  ✗ {message}"));
            }
            EventPayload::RunFinished { status, error } => {
                self.flush_output(|_| true);
                let secs = started
                    .map(|t| (event.ts - t).num_milliseconds() as f64 / 1000.0)
                    .unwrap_or(0.0);
                let why = error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default();
                let mark = match status {
                    RunStatus::Succeeded => "●",
                    _ => "✗",
                };
                self.line(&format!("{mark} run {status} in {secs:.1}s{why}"));
            }
        }
    }
}

impl Renderer {
    /// One line under a node's start: the command it runs, or the start of its prompt,
    /// image or repository; dimmed on a terminal.
    fn detail(&self, node_type: &str, detail: &str) {
        let label = match node_type {
            "exec" => "$ ",
            "agent" | "agent_sandbox" => "prompt: ",
            "provision" => "image: ",
            "checkout" => "repo: ",
            _ => "",
        };
        let first = detail.trim().lines().next().unwrap_or("");
        let mut shown: String = first.chars().take(DETAIL_CHARS).collect();
        if shown.len() < detail.trim().len() {
            shown.push('…');
        }
        let text = format!("  {label}{shown}");
        if self.spinner.is_some() && std::env::var_os("NO_COLOR").is_none() {
            let text = terminal::safe(&text);
            self.line_raw(&format!("\x1b[2m{text}\x1b[0m"));
        } else {
            self.line(&text);
        }
    }

    /// Shows every complete line of `chunk`, after what was left of the node's
    /// stream; keeps the rest for later.
    fn output(&self, node: Option<&str>, stream: OutputStream, chunk: &str) {
        let mut partial = self.partial.lock().unwrap_or_else(|p| p.into_inner());
        let index = match partial
            .iter()
            .position(|p| p.node.as_deref() == node && p.stream == stream)
        {
            Some(index) => index,
            None => {
                partial.push(PartialLine {
                    node: node.map(str::to_owned),
                    stream,
                    text: String::new(),
                });
                partial.len() - 1
            }
        };
        let pending = &mut partial[index].text;
        pending.push_str(chunk);
        let Some(end) = pending.rfind('\n') else {
            return;
        };
        let rest = pending.split_off(end + 1);
        let complete = std::mem::replace(pending, rest);
        if partial[index].text.is_empty() {
            partial.remove(index);
        }
        drop(partial);
        for line in complete.lines() {
            self.output_line(stream, line);
        }
    }

    /// Shows the partial lines `which` selects, each as a line of its own.
    fn flush_output(&self, which: impl Fn(&PartialLine) -> bool) {
        let flushed: Vec<PartialLine> = {
            let mut partial = self.partial.lock().unwrap_or_else(|p| p.into_inner());
            let (flushed, kept) = std::mem::take(&mut *partial).into_iter().partition(which);
            *partial = kept;
            flushed
        };
        for p in flushed {
            self.output_line(p.stream, &p.text);
        }
    }

    fn output_line(&self, stream: OutputStream, line: &str) {
        let bar = if stream == OutputStream::Stderr {
            "┆"
        } else {
            "│"
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        self.line(&format!("  {bar} {line}"));
    }
}

impl EventSink for Renderer {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        let mut started = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if started.is_none() {
            *started = Some(event.ts);
        }
        if self.json {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", event.to_json_line());
            let _ = out.flush();
        } else {
            self.human(event, *started);
        }
        Ok(())
    }
}
