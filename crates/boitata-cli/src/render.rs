//! Showing events: human progress on stderr (with a spinner naming the current tool
//! call when stderr is a terminal), or one JSON event per line on stdout.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use boitata_core::event::SinkError;
use boitata_core::{Event, EventPayload, EventSink, Outcome, OutputStream, RunStatus};
use indicatif::{ProgressBar, ProgressStyle};

/// Prints events as they happen.
pub(crate) struct Renderer {
    json: bool,
    to_stdout: bool,
    spinner: Option<ProgressBar>,
    state: Mutex<State>,
}

/// What the human view remembers between events.
#[derive(Default)]
struct State {
    /// When the run started (its first event).
    started: Option<chrono::DateTime<chrono::Utc>>,
    /// A command's output line not ended yet (`.` after `.` of a test runner), with
    /// the node and stream it came from: shown once it ends, or the node does.
    partial: Option<(Option<String>, OutputStream, String)>,
}

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
            state: Mutex::new(State::default()),
        }
    }

    /// A human renderer that writes to stdout, with no spinner (for `runs show`).
    pub(crate) fn to_stdout() -> Self {
        Renderer {
            json: false,
            to_stdout: true,
            spinner: None,
            state: Mutex::new(State::default()),
        }
    }

    fn line(&self, text: &str) {
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
            bar.set_message(text.into());
        }
    }

    /// One line of a command's output, marked with its stream.
    fn output_line(&self, stream: OutputStream, text: &str) {
        let bar = if stream == OutputStream::Stderr {
            "┆"
        } else {
            "│"
        };
        self.line(&format!("  {bar} {text}"));
    }

    /// A one-off note on stderr (also in `--json` mode, where stdout is for events).
    pub(crate) fn note(&self, text: &str) {
        self.line(&format!("note: {text}"));
    }

    /// Stops the spinner.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.spinner {
            bar.finish_and_clear();
        }
    }

    /// The run's result on stdout (not in `--json` mode).
    pub(crate) fn print_result(&self, text: &str) {
        if !self.json && !text.is_empty() {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", text.trim_end());
            let _ = out.flush();
        }
    }

    fn human(&self, event: &Event, state: &mut State) {
        let node = event.node.as_deref();
        let started = state.started;
        // A pending partial line ends with anything else than more of its output.
        let continues = matches!(
            (&event.payload, &state.partial),
            (EventPayload::ExecOutput { stream, .. }, Some((n, s, _)))
                if n.as_deref() == node && s == stream
        );
        if !continues {
            if let Some((_, stream, text)) = state.partial.take() {
                self.output_line(stream, &text);
            }
        }
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
            EventPayload::NodeStarted { node_type } => {
                let name = node.unwrap_or("?");
                self.line(&format!("▶ {name} ({node_type})"));
                self.status(format!("{name}: running"));
            }
            EventPayload::NodeFinished {
                outcome,
                exit_code,
                error,
                ..
            } => {
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
            } => {
                let short: String = sandbox_id.chars().take(12).collect();
                self.line(&format!("  sandbox {short} ready ({backend}, {image})"));
            }
            EventPayload::SandboxDestroyed { sandbox_id } => {
                let short: String = sandbox_id.chars().take(12).collect();
                self.line(&format!("  sandbox {short} destroyed"));
            }
            EventPayload::ExecOutput { stream, chunk } => {
                let mut text = match state.partial.take() {
                    Some((_, _, pending)) => pending,
                    None => String::new(),
                };
                text.push_str(chunk);
                let (complete, rest) = match text.rfind('\n') {
                    Some(end) => text.split_at(end + 1),
                    None => ("", text.as_str()),
                };
                for l in complete.lines() {
                    self.output_line(*stream, l);
                }
                if !rest.is_empty() {
                    state.partial = Some((event.node.clone(), *stream, rest.to_owned()));
                }
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
                let summary = summarize_arguments(arguments);
                self.line(&format!("  → {tool} {summary}"));
                self.status(format!("{tool} {summary}"));
            }
            EventPayload::ToolResult { ok, output, .. } => {
                let first = output.lines().next().unwrap_or("");
                let first: String = first.chars().take(120).collect();
                if *ok {
                    self.line(&format!("    ✓ {} bytes", output.len()));
                } else {
                    self.line(&format!("    ✗ {first}"));
                }
                self.status("thinking");
            }
            EventPayload::Usage { .. } => {}
            EventPayload::RunFinished { status, error } => {
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

/// A short view of tool arguments: the path or command when there is one.
fn summarize_arguments(arguments: &serde_json::Value) -> String {
    for key in ["command", "path", "pattern", "message"] {
        if let Some(v) = arguments.get(key).and_then(|v| v.as_str()) {
            let one_line: String = v.lines().next().unwrap_or("").chars().take(80).collect();
            return one_line;
        }
    }
    String::new()
}

impl EventSink for Renderer {
    fn accept(&self, event: &Event) -> Result<(), SinkError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.started.is_none() {
            state.started = Some(event.ts);
        }
        if self.json {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", event.to_json_line());
            let _ = out.flush();
        } else {
            self.human(event, &mut state);
        }
        Ok(())
    }
}
