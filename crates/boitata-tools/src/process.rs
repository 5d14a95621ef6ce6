//! Child processes for tools: run a program with an explicit environment, a deadline,
//! an output cap, and no way to outlive the call.
//!
//! [`ChildCommand::run`] is what `execute_command` and the git tools use. The child:
//! - gets exactly the environment it is given (the agent's own environment is cleared:
//!   it holds provider keys), `/dev/null` as stdin, and one pipe for stdout and stderr,
//!   so the two are interleaved in the order they were written, as on a terminal;
//! - leads a new session and process group (through `setsid(1)` when the host has it,
//!   so it has no controlling terminal; otherwise a new process group only), so
//!   everything it starts can be signalled at once;
//! - is stopped at the deadline or on cancellation: `SIGTERM` to the whole process
//!   group, then `SIGKILL` after a short grace, and output is no longer awaited even if
//!   something outside the group still holds the pipe;
//! - may not leave processes behind: when it exits, anything still running in its
//!   process group (`server &`) is stopped the same way, and the output says so.
//!
//! The output kept is the first and the last `max_output_bytes / 2` bytes; what lies
//! between is replaced by a marker saying how many bytes were cut.
//!
//! # Example
//! ```no_run
//! # async fn example() -> Result<(), boitata_tools::process::ProcessError> {
//! use std::time::Duration;
//! use boitata_tools::process::{ChildCommand, Ending};
//! use tokio_util::sync::CancellationToken;
//!
//! let output = ChildCommand::new("/bin/sh", "/tmp")
//!     .args(["-c", "echo hello"])
//!     .env([("PATH".to_owned(), "/usr/bin:/bin".to_owned())].into())
//!     .timeout(Duration::from_secs(10))
//!     .max_output_bytes(4096)
//!     .run(&CancellationToken::new())
//!     .await?;
//! assert_eq!(output.ending, Ending::Exited(0));
//! assert_eq!(output.output, "hello\n");
//! # Ok(())
//! # }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a process group gets between `SIGTERM` and `SIGKILL`.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long output is still read once the process group is gone (something outside the
/// group may hold the pipe open forever).
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// Where `setsid(1)` may live. Looked up at these fixed places, never through `PATH`.
const SETSID_PATHS: [&str; 2] = ["/usr/bin/setsid", "/bin/setsid"];

/// A program to run as a confined-lifetime child: see the [module docs](self).
#[derive(Debug, Clone)]
pub struct ChildCommand {
    program: OsString,
    args: Vec<OsString>,
    cwd: PathBuf,
    env: BTreeMap<String, String>,
    timeout: Duration,
    max_output_bytes: usize,
}

/// How the child's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Exited(i32),
    /// A signal (this number) ended it, not sent by us.
    Signalled(i32),
    /// The deadline passed; its process group was killed.
    TimedOut(Duration),
    /// The cancellation token fired; its process group was killed.
    Cancelled,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct ChildOutput {
    /// Stdout and stderr as written, lossily UTF-8, cut in the middle with a marker if
    /// it was longer than the cap.
    pub output: String,
    /// How many bytes of output were cut (0 if none).
    pub cut_bytes: u64,
    /// How it ended.
    pub ending: Ending,
    /// The process group (and, with `setsid(1)`, session) id the child led.
    pub process_group: i32,
    /// True if processes were still running in the group after the child exited, and
    /// were stopped.
    pub stopped_leftovers: bool,
}

/// Why a child could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        source: io::Error,
    },
    /// Reading its output or waiting for it failed.
    #[error("while running {program}: {source}")]
    Io {
        /// The program.
        program: String,
        /// The cause.
        source: io::Error,
    },
}

impl ChildCommand {
    /// A command running `program` in the directory `cwd`, with an empty environment,
    /// a 120 s timeout and a 32 KiB output cap until set otherwise.
    pub fn new(program: impl Into<OsString>, cwd: impl AsRef<Path>) -> Self {
        ChildCommand {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.as_ref().to_path_buf(),
            env: BTreeMap::new(),
            timeout: Duration::from_secs(120),
            max_output_bytes: 32 * 1024,
        }
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends arguments.
    pub fn args<I, A>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets the child's whole environment (nothing else is inherited).
    pub fn env(mut self, env: BTreeMap<String, String>) -> Self {
        self.env = env;
        self
    }

    /// Sets how long the child may run before its process group is killed.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how many bytes of output are kept (half from the start, half from the end).
    pub fn max_output_bytes(mut self, max_output_bytes: usize) -> Self {
        self.max_output_bytes = max_output_bytes;
        self
    }

    /// Runs the child to its end, its deadline, or `cancel`, whichever comes first, and
    /// returns once its process group is gone.
    ///
    /// If the returned future is dropped early, the process group is sent `SIGKILL`.
    ///
    /// # Errors
    /// [`ProcessError::Spawn`] if the program cannot be started (not found, not
    /// executable, `cwd` missing); [`ProcessError::Io`] if reading or waiting fails.
    pub async fn run(&self, cancel: &CancellationToken) -> Result<ChildOutput, ProcessError> {
        let program = self.program.to_string_lossy().into_owned();
        let io_err = |source| ProcessError::Io {
            program: program.clone(),
            source,
        };
        let (reader, writer) = io::pipe().map_err(io_err)?;
        let writer_for_stderr = writer.try_clone().map_err(io_err)?;

        let mut command = match SETSID_PATHS.iter().map(Path::new).find(|p| p.exists()) {
            Some(setsid) => {
                // The child is not a process group leader, so setsid(1) calls setsid(2)
                // itself and execs the program with pid = pgid = sid.
                let mut command = Command::new(setsid);
                command.arg(&self.program);
                command
            }
            None => {
                let mut command = Command::new(&self.program);
                command.process_group(0);
                command
            }
        };
        command
            .args(&self.args)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(Stdio::from(writer))
            .stderr(Stdio::from(writer_for_stderr))
            .kill_on_drop(true);
        let spawned = command.spawn();
        // Our copies of the pipe's write end live in `command`: close them, or the
        // output never ends.
        drop(command);
        let mut child = spawned.map_err(|source| ProcessError::Spawn {
            program: program.clone(),
            source,
        })?;
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw)
            .ok_or_else(|| io_err(io::Error::other("the child has no process id")))?;
        let mut guard = GroupGuard { pid, armed: true };
        let mut reader = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
            .map_err(io_err)?;

        // An absurd timeout (centuries) means no deadline, not an overflow panic.
        let deadline = Instant::now().checked_add(self.timeout);
        let mut capture = Capture::new(self.max_output_bytes);
        let mut buf = vec![0u8; 16 * 1024];
        let mut eof = false;
        let mut status: Option<ExitStatus> = None;

        // Phase 1: until the child exits, the deadline passes, or we are cancelled,
        // keep reading (so a full pipe never blocks the child).
        let stopped_by_us = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break Some(Ending::Cancelled),
                () = sleep_until_or_forever(deadline) => {
                    break Some(Ending::TimedOut(self.timeout));
                }
                waited = child.wait() => {
                    status = Some(waited.map_err(io_err)?);
                    break None;
                }
                read = reader.read(&mut buf), if !eof => match read {
                    Ok(0) => eof = true,
                    Ok(n) => capture.push(buf.get(..n).unwrap_or_default()),
                    Err(e) => return Err(io_err(e)),
                },
            }
        };

        // Phase 2: make sure nothing of the group survives.
        let leftovers = stopped_by_us.is_none() && group_alive(pid);
        if stopped_by_us.is_some() || leftovers {
            terminate_group(pid, &mut child, &mut status).await;
        }
        guard.armed = false;

        // Phase 3: read what is left in the pipe, but not forever: a process that
        // escaped the group may still hold it open.
        if !eof {
            let drain = async {
                loop {
                    match reader.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => capture.push(buf.get(..n).unwrap_or_default()),
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN_GRACE, drain).await;
        }

        let ending = match (stopped_by_us, status) {
            (Some(ending), _) => ending,
            (None, Some(status)) => match (status.code(), status.signal()) {
                (Some(code), _) => Ending::Exited(code),
                (None, Some(signal)) => Ending::Signalled(signal),
                (None, None) => Ending::Exited(-1),
            },
            (None, None) => Ending::Exited(-1),
        };
        let (output, cut_bytes) = capture.finish();
        Ok(ChildOutput {
            output,
            cut_bytes,
            ending,
            process_group: pid.as_raw(),
            stopped_leftovers: leftovers,
        })
    }
}

/// Sleeps until `deadline`, or forever when there is none.
async fn sleep_until_or_forever(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Sends `SIGKILL` to the process group if the run future is dropped mid-way.
struct GroupGuard {
    pid: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pid, Signal::SIGKILL);
        }
    }
}

/// Signals the group led by `pid`, and `pid` itself in case it has not yet made its
/// own group (the instant between fork and `setsid`).
fn signal_group(pid: Pid, signal: Signal) {
    if killpg(pid, signal) == Err(Errno::ESRCH) {
        let _ = kill(pid, signal);
    }
}

/// Whether any live (not zombie) process is still in the group.
fn group_alive(pgid: Pid) -> bool {
    if killpg(pgid, None).is_err() {
        return false;
    }
    // Zombies count for kill(2) but not for us: an orphan reaped late by init would
    // otherwise look alive until the grace ends.
    match std::fs::read_dir("/proc") {
        Ok(entries) => entries.flatten().any(|entry| {
            let is_pid = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
            is_pid
                && std::fs::read_to_string(entry.path().join("stat"))
                    .ok()
                    .and_then(|stat| ProcStat::parse(&stat))
                    .is_some_and(|stat| stat.state != 'Z' && stat.pgrp == pgid.as_raw())
        }),
        Err(_) => true,
    }
}

/// What `/proc/PID/stat` says about a process: the one reader of that file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// The state letter (`R`, `S`, `Z` for a zombie, `X` for dead, …).
    pub state: char,
    /// The process group id.
    pub pgrp: i32,
    /// When it started, in clock ticks since boot.
    pub start_time: u64,
}

impl ProcStat {
    /// `/proc/PID/stat` for `pid`, or `None` when there is no such process (or no
    /// `/proc`).
    pub fn read(pid: u32) -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Parses a `/proc/PID/stat` line. The command name may contain spaces and
    /// parentheses, so fields are counted from the last `)`.
    pub fn parse(stat: &str) -> Option<ProcStat> {
        let after_name = stat.get(stat.rfind(')')? + 1..)?;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        Some(ProcStat {
            state: fields.first()?.chars().next()?,
            pgrp: fields.get(2)?.parse().ok()?,
            start_time: fields.get(19)?.parse().ok()?,
        })
    }

    /// True unless the process is a zombie or dead.
    pub fn running(&self) -> bool {
        self.state != 'Z' && self.state != 'X'
    }
}

/// `SIGTERM` to the group, a grace period, then `SIGKILL`; reaps the child.
async fn terminate_group(pid: Pid, child: &mut Child, status: &mut Option<ExitStatus>) {
    signal_group(pid, Signal::SIGTERM);
    let grace_end = Instant::now().checked_add(KILL_GRACE);
    loop {
        if status.is_none() {
            if let Ok(Some(exited)) = child.try_wait() {
                *status = Some(exited);
            }
        }
        if !group_alive(pid) || grace_end.is_none_or(|end| Instant::now() >= end) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal_group(pid, Signal::SIGKILL);
    if status.is_none() {
        if let Ok(Ok(exited)) = tokio::time::timeout(KILL_GRACE, child.wait()).await {
            *status = Some(exited);
        }
    }
}

/// Keeps the first and last `cap / 2` bytes of a stream and counts the rest.
#[derive(Debug)]
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl Capture {
    fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap - head_cap,
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_cap.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        bytes = rest;
        if bytes.len() > self.tail_cap {
            bytes = bytes.get(bytes.len() - self.tail_cap..).unwrap_or_default();
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.tail_cap);
        self.tail.drain(..excess);
    }

    /// The kept text, with a marker where bytes were cut, and how many were cut.
    fn finish(self) -> (String, u64) {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let cut = self.total - kept;
        let mut bytes = self.head;
        if cut > 0 {
            // Cut between characters, not inside one.
            let head = &bytes[..utf8_prefix_len(&bytes)];
            let tail = Vec::from(self.tail);
            let skip = tail
                .iter()
                .take(3)
                .take_while(|&&b| b & 0xC0 == 0x80)
                .count();
            let cut = cut + (bytes.len() - head.len() + skip) as u64;
            let mut text = String::from_utf8_lossy(head).into_owned();
            text.push_str(&cut_marker(cut));
            text.push_str(&String::from_utf8_lossy(&tail[skip..]));
            (text, cut)
        } else {
            bytes.extend(self.tail);
            (String::from_utf8_lossy(&bytes).into_owned(), 0)
        }
    }
}

/// The length of `bytes` without a trailing incomplete UTF-8 sequence: only the
/// start of a character that the next read may finish is held back, whatever comes
/// before it (invalid bytes count as complete; they become U+FFFD). The one rule every
/// reader of streamed command output uses (host and sandbox `exec`, the cut in
/// [`ChildCommand::run`]'s output).
pub fn utf8_prefix_len(bytes: &[u8]) -> usize {
    // A character is at most 4 bytes: an unfinished one starts in the last 3.
    let earliest = bytes.len().saturating_sub(3);
    let Some(start) = (earliest..bytes.len())
        .rev()
        .find(|&at| bytes[at] & 0xC0 != 0x80)
    else {
        return bytes.len();
    };
    match std::str::from_utf8(&bytes[start..]) {
        // Valid so far, but cut short: the rest may come with the next read.
        Err(e) if e.valid_up_to() == 0 && e.error_len().is_none() => start,
        _ => bytes.len(),
    }
}

/// Hardens the calling process against its own children; call it first thing in
/// `main` of every binary that holds secrets (provider keys, tokens).
///
/// On Linux it marks the process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): a
/// process of the same user without `CAP_SYS_PTRACE`, such as a command the agent
/// runs, can then no longer read `/proc/PID/environ` or `/proc/PID/mem` of this one,
/// nor attach a debugger, and no core dump is written. Clearing the environment of
/// children is not enough: `cat /proc/$PPID/environ` shows the environment this
/// process was started with, even after `remove_var`.
///
/// It does not protect against root (or `CAP_SYS_PTRACE`), which may read any
/// process: run untrusted work in a sandbox. Elsewhere than Linux it does nothing.
///
/// # Errors
/// The `prctl` error, which callers may log and go on: the process still runs, less
/// protected.
pub fn harden_process() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    nix::sys::prctl::set_dumpable(false).map_err(io::Error::from)?;
    Ok(())
}

/// The marker put where output was cut: `\n[... 1234 bytes cut ...]\n`.
pub fn cut_marker(cut_bytes: u64) -> String {
    format!("\n[... {cut_bytes} bytes cut ...]\n")
}

/// Where a process id means something: the host name and this process's PID
/// namespace (e.g. `vm pid:[4026531836]`). A pid recorded under another scope cannot
/// be judged from here: it may be alive in a namespace this process cannot see.
pub fn owner_scope() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    match std::fs::read_link("/proc/self/ns/pid") {
        Ok(ns) => format!("{host} {}", ns.display()),
        Err(_) => host,
    }
}

/// Whether this process runs as root (effective uid 0): its commands can then read
/// every process's environment and memory, non-dumpable or not.
pub fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Whether process `pid` exists here and is not a zombie; when `started` is given
/// (clock ticks since boot, [`start_time`]), also that it is the process that started
/// then, and not a later one given the same pid.
pub fn pid_alive(pid: u32, started: Option<u64>) -> bool {
    ProcStat::read(pid).is_some_and(|stat| {
        stat.running() && started.is_none_or(|expected| stat.start_time == expected)
    })
}

/// When process `pid` started, in clock ticks since boot; `None` if it does not exist.
pub fn start_time(pid: u32) -> Option<u64> {
    ProcStat::read(pid).map(|stat| stat.start_time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_head_and_tail_and_counts_the_cut() {
        let mut capture = Capture::new(10);
        capture.push(b"0123");
        capture.push(b"456789abcdef");
        capture.push(b"XYZ");
        let (text, cut) = capture.finish();
        assert_eq!(cut, 9);
        assert_eq!(text, format!("01234{}efXYZ", cut_marker(9)));
    }

    #[test]
    fn capture_cuts_between_characters() {
        let mut capture = Capture::new(8);
        // Head: "ab" + the first 2 bytes of "一"; tail: its last byte + "cd" + "é".
        capture.push("ab一xxxxxxcd一é".as_bytes());
        let (text, cut) = capture.finish();
        assert!(!text.contains('\u{FFFD}'), "{text}");
        assert!(text.starts_with("ab"), "{text}");
        assert!(text.ends_with("é"), "{text}");
        assert_eq!(cut, "ab一xxxxxxcd一é".len() as u64 - 2 - 2);
    }

    #[test]
    fn capture_under_the_cap_is_whole() {
        let mut capture = Capture::new(10);
        capture.push(b"abc");
        capture.push(b"def");
        assert_eq!(capture.finish(), ("abcdef".to_owned(), 0));
    }

    #[tokio::test]
    async fn an_absurd_timeout_is_no_deadline_not_a_panic() {
        let dir = std::env::temp_dir();
        let output = ChildCommand::new("/bin/sh", &dir)
            .args(["-c", "echo ok"])
            .timeout(Duration::MAX)
            .run(&CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(output.ending, Ending::Exited(0));
        assert_eq!(output.output, "ok\n");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn harden_process_makes_the_process_non_dumpable() {
        // Each nextest test is its own process: this changes nobody else's.
        harden_process().unwrap();
        assert!(!nix::sys::prctl::get_dumpable().unwrap());
    }

    #[test]
    fn stat_fields_survive_odd_command_names() {
        let stat =
            "123 (a) b (c)) S 1 456 456 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 50";
        assert_eq!(
            ProcStat::parse(stat),
            Some(ProcStat {
                state: 'S',
                pgrp: 456,
                start_time: 98765
            })
        );
        assert_eq!(ProcStat::parse("123 (a) S 1 456"), None, "cut short");
    }

    #[test]
    fn this_process_is_alive_and_a_finished_child_is_not() {
        let me = std::process::id();
        let started = start_time(me);
        assert!(started.is_some());
        assert!(pid_alive(me, started));
        assert!(pid_alive(me, None));
        assert!(
            !pid_alive(me, started.map(|s| s + 1)),
            "another start time is another process"
        );
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!pid_alive(pid, None));
    }

    #[test]
    fn the_owner_scope_names_the_pid_namespace() {
        let ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
        assert!(
            owner_scope().ends_with(&format!(" {}", ns.display())),
            "{}",
            owner_scope()
        );
    }
}
