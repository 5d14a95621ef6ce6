//! Host rules that keep a run network's sandboxes away from the host's services.
//!
//! Docker's internal networks have no route out, but nothing stops a sandbox from
//! opening a connection to the host's own addresses (its gateway address, `docker0`'s,
//! the machine's LAN address): every service listening on `0.0.0.0` would be in reach.
//! These rules close that, on the `INPUT` chain of the `filter` table, for traffic
//! arriving on the run network's bridge interface:
//!
//! ```text
//! -A INPUT -i bt-… -m comment --comment boitata-run-RUN -j BOITATA-…   (the run's chain)
//! -A INPUT -i bt-… -m comment --comment boitata-run-RUN -j DROP        (anything it returns)
//! -A BOITATA-… -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT      (answers to the host)
//! -A BOITATA-… -s SANDBOX -m conntrack --ctstate NEW -j DROP            (egress: none)
//! -A BOITATA-… -d GATEWAY -p tcp --dport PORT -j ACCEPT                  (each allowed port)
//! ```
//!
//! Every rule carries the comment `boitata-run-RUN`, by which [`Firewall::remove_run`]
//! and the reaper find them. The rules are set with the same `iptables` the Docker
//! daemon uses (the nf_tables or the legacy variant, see [`Firewall::detect`]), so that
//! both sets live in one place. Setting them needs root (or `CAP_NET_ADMIN`); when that
//! fails, nothing is started on the network.
//!
//! Each change is one atomic batch (`iptables-restore --noflush`, one process): a run's
//! rules are all set or none, and setting or removing them costs one process run, not
//! one per rule.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::sync::OnceCell;

/// The prefix of the comment on every host rule of a run: `boitata-run-RUN`.
pub const RULE_COMMENT_PREFIX: &str = "boitata-run-";

/// The prefix of every run's own chain.
const CHAIN_PREFIX: &str = "BOITATA-";

/// How long an `iptables` call waits for the xtables lock, in seconds.
const LOCK_WAIT_SECONDS: &str = "10";

/// The `iptables` variant found by [`Firewall::detect`], once per process: the daemon's
/// choice does not change while it runs, and asking costs up to three process runs.
static DETECTED: OnceCell<Firewall> = OnceCell::const_new();

/// A host rule could not be read, set or removed.
#[derive(Debug, thiserror::Error)]
pub enum FirewallError {
    /// No `iptables` program could be run.
    #[error(
        "no iptables program can be run here ({reason}): install iptables (the Debian \
         package `iptables`) to isolate run networks, or opt out with network: bridge \
         (not isolated)"
    )]
    Missing {
        /// Why each candidate failed.
        reason: String,
    },
    /// An `iptables` call failed.
    #[error(
        "`{command}` failed: {stderr}: host rules need root (or CAP_NET_ADMIN); run \
         boitata as root, or opt out with network: bridge (not isolated)"
    )]
    Command {
        /// The command line.
        command: String,
        /// What it printed on stderr (or its exit status).
        stderr: String,
    },
}

/// The `iptables` the Docker daemon uses, and the rule operations on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firewall {
    program: String,
}

impl Firewall {
    /// The `iptables` variant the daemon set its own rules with: the one whose `nat`
    /// table has Docker's `DOCKER` chain (`iptables-nft` or `iptables-legacy`); plain
    /// `iptables` when neither has it (or neither is installed).
    ///
    /// # Errors
    /// [`FirewallError::Missing`] when no `iptables` program runs at all.
    /// The answer is kept for the life of the process (a failure is not: the next call
    /// asks again).
    pub async fn detect() -> Result<Firewall, FirewallError> {
        DETECTED.get_or_try_init(Self::detect_now).await.cloned()
    }

    async fn detect_now() -> Result<Firewall, FirewallError> {
        let mut reasons = Vec::new();
        for program in ["iptables-nft", "iptables-legacy"] {
            let firewall = Firewall {
                program: program.to_owned(),
            };
            match firewall.run(&["-t", "nat", "-S", "DOCKER"]).await {
                Ok(_) => return Ok(firewall),
                Err(e) => reasons.push(format!("{program}: {}", short(&e))),
            }
        }
        let plain = Firewall {
            program: "iptables".to_owned(),
        };
        match plain.run(&["-S", "INPUT"]).await {
            Ok(_) => Ok(plain),
            Err(e) => {
                reasons.push(format!("iptables: {}", short(&e)));
                Err(FirewallError::Missing {
                    reason: reasons.join("; "),
                })
            }
        }
    }

    /// The program used (`iptables-nft`, `iptables-legacy` or `iptables`).
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Closes the host to traffic from `interface` except answers to connections the
    /// host opened, for run `run_id`; ports are opened with [`Firewall::allow_port`].
    /// On failure, whatever was set is removed.
    ///
    /// # Errors
    /// [`FirewallError`] when a rule cannot be set.
    pub async fn isolate(&self, run_id: &str, interface: &str) -> Result<(), FirewallError> {
        let comment = rule_comment(run_id);
        let chain = chain_name(run_id);
        // One batch, applied atomically: the jump to the run's chain above the DROP,
        // both first in INPUT.
        let script = format!(
            "*filter\n\
             :{chain} - [0:0]\n\
             -A {chain} -m conntrack --ctstate RELATED,ESTABLISHED -m comment --comment {comment} -j ACCEPT\n\
             -I INPUT 1 -i {interface} -m comment --comment {comment} -j DROP\n\
             -I INPUT 1 -i {interface} -m comment --comment {comment} -j {chain}\n\
             COMMIT\n"
        );
        self.restore(&script).await
    }

    /// Removes the rules [`Firewall::isolate`] set for run `run_id` on `interface`, the
    /// ports opened since and the run's chain, in one batch; when they are not exactly
    /// those (a rule missing, one added by hand), falls back to
    /// [`Firewall::remove_run`].
    ///
    /// # Errors
    /// [`FirewallError`] when the rules cannot be listed or one cannot be removed.
    pub async fn remove_isolation(
        &self,
        run_id: &str,
        interface: &str,
    ) -> Result<(), FirewallError> {
        let comment = rule_comment(run_id);
        let chain = chain_name(run_id);
        let script = format!(
            "*filter\n\
             -D INPUT -i {interface} -m comment --comment {comment} -j {chain}\n\
             -D INPUT -i {interface} -m comment --comment {comment} -j DROP\n\
             -F {chain}\n\
             -X {chain}\n\
             COMMIT\n"
        );
        match self.restore(&script).await {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::debug!(
                    run = run_id,
                    "removing the host rules in one batch: {e}; listing them"
                );
                self.remove_run(run_id).await.map(|_| ())
            }
        }
    }

    /// Lets the run's sandboxes open TCP connections to `gateway:port` on the host.
    ///
    /// # Errors
    /// [`FirewallError`] when the rule cannot be set.
    pub async fn allow_port(
        &self,
        run_id: &str,
        gateway: IpAddr,
        port: u16,
    ) -> Result<(), FirewallError> {
        let gateway = gateway.to_string();
        let port = port.to_string();
        self.run(&[
            "-A",
            &chain_name(run_id),
            "-d",
            &gateway,
            "-p",
            "tcp",
            "--dport",
            &port,
            "-m",
            "comment",
            "--comment",
            &rule_comment(run_id),
            "-j",
            "ACCEPT",
        ])
        .await
        .map(|_| ())
    }

    /// Forbids the sandbox at `source` to open any connection to the host (it can
    /// still answer the host's own, such as the orchestrator's ACP connection).
    ///
    /// # Errors
    /// [`FirewallError`] when the rule cannot be set.
    pub async fn deny_source(&self, run_id: &str, source: IpAddr) -> Result<(), FirewallError> {
        let source = source.to_string();
        // Right after the ESTABLISHED rule, above every port rule.
        self.run(&[
            "-I",
            &chain_name(run_id),
            "2",
            "-s",
            &source,
            "-m",
            "conntrack",
            "--ctstate",
            "NEW",
            "-m",
            "comment",
            "--comment",
            &rule_comment(run_id),
            "-j",
            "DROP",
        ])
        .await
        .map(|_| ())
    }

    /// Removes every host rule of run `run_id` and its chain. Returns how many rules
    /// were removed from `INPUT` (0 when there were none).
    ///
    /// # Errors
    /// [`FirewallError`] when the rules cannot be listed or one cannot be removed.
    pub async fn remove_run(&self, run_id: &str) -> Result<usize, FirewallError> {
        let comment = rule_comment(run_id);
        // The whole filter table: INPUT's rules and which chains exist.
        let listing = self.run(&["-S"]).await?;
        let mut removed = 0;
        let mut chains = BTreeSet::from([chain_name(run_id)]);
        let mut script = String::from("*filter\n");
        for line in listing.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let ours = words
                .windows(2)
                .any(|w| w[0] == "--comment" && w[1] == comment);
            if !ours || words.get(..2) != Some(&["-A", "INPUT"]) {
                continue;
            }
            if let Some(target) = words.windows(2).find(|w| w[0] == "-j").map(|w| w[1]) {
                if target.starts_with(CHAIN_PREFIX) {
                    chains.insert(target.to_owned());
                }
            }
            script.push_str(&format!("-D {}\n", words[1..].join(" ")));
            removed += 1;
        }
        let existing: BTreeSet<&str> = listing
            .lines()
            .filter_map(|line| line.strip_prefix("-N "))
            .map(str::trim)
            .collect();
        // Absent chains are fine: nothing to remove.
        for chain in chains.iter().filter(|c| existing.contains(c.as_str())) {
            script.push_str(&format!("-F {chain}\n-X {chain}\n"));
        }
        if script.lines().count() > 1 {
            script.push_str("COMMIT\n");
            self.restore(&script).await?;
        }
        Ok(removed)
    }

    /// The runs (by the id in their rules' comment) that have host rules here.
    ///
    /// # Errors
    /// [`FirewallError`] when the rules cannot be listed.
    pub async fn runs_with_rules(&self) -> Result<BTreeSet<String>, FirewallError> {
        let listing = self.run(&["-S", "INPUT"]).await?;
        Ok(listing
            .lines()
            .filter_map(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                words
                    .windows(2)
                    .find(|w| w[0] == "--comment")
                    .and_then(|w| w[1].strip_prefix(RULE_COMMENT_PREFIX))
                    .map(str::to_owned)
            })
            .collect())
    }

    /// Every rule line (`-A …`) in `INPUT` and the run's chain that belongs to run
    /// `run_id`, for tests and diagnostics.
    ///
    /// # Errors
    /// [`FirewallError`] when the rules cannot be listed.
    pub async fn rules_of(&self, run_id: &str) -> Result<Vec<String>, FirewallError> {
        let comment = rule_comment(run_id);
        let mut listing = self.run(&["-S", "INPUT"]).await?;
        if let Ok(chain) = self.run(&["-S", &chain_name(run_id)]).await {
            listing.push_str(&chain);
        }
        Ok(listing
            .lines()
            .filter(|line| {
                line.split_whitespace()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| w[0] == "--comment" && w[1] == comment)
            })
            .map(str::to_owned)
            .collect())
    }

    /// Applies `script` (the `iptables-restore` format) atomically with the
    /// `-restore` program of this variant, `--noflush` (only what it names changes).
    async fn restore(&self, script: &str) -> Result<(), FirewallError> {
        let program = format!("{}-restore", self.program);
        let command = format!("{program} --noflush -w {LOCK_WAIT_SECONDS} <<< {script:?}");
        let failed = |stderr: String| FirewallError::Command {
            command: command.clone(),
            stderr,
        };
        let mut child = Command::new(&program)
            .args(["--noflush", "-w", LOCK_WAIT_SECONDS])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(format!("cannot run {program}: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(script.as_bytes())
                .await
                .map_err(|e| failed(format!("cannot write to {program}: {e}")))?;
        }
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| failed(format!("waiting for {program}: {e}")))?;
        if output.status.success() {
            return Ok(());
        }
        Err(failed(stderr_text(&output)))
    }

    /// Runs `program -w SECONDS ARGS…` with a closed stdin; its stdout.
    async fn run(&self, args: &[&str]) -> Result<String, FirewallError> {
        let command = format!("{} {}", self.program, args.join(" "));
        let output = Command::new(&self.program)
            .args(["-w", LOCK_WAIT_SECONDS])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| FirewallError::Command {
                command: command.clone(),
                stderr: format!("cannot run {}: {e}", self.program),
            })?;
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
        }
        Err(FirewallError::Command {
            command,
            stderr: stderr_text(&output),
        })
    }
}

/// What a failed `iptables` printed on stderr, without its warnings (or its exit
/// status when it printed nothing else).
fn stderr_text(output: &std::process::Output) -> String {
    let stderr: String = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|l| !l.starts_with("# Warning"))
        .collect::<Vec<_>>()
        .join(" ");
    if stderr.trim().is_empty() {
        format!("exit status {}", output.status)
    } else {
        stderr.trim().to_owned()
    }
}

/// The comment on every host rule of run `run_id`: `boitata-run-RUN`, with anything
/// but letters, digits, `-`, `_` and `.` replaced by `_` (so `iptables -S` prints it
/// as one word).
pub fn rule_comment(run_id: &str) -> String {
    let safe: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(200)
        .collect();
    format!("{RULE_COMMENT_PREFIX}{safe}")
}

/// The run's own chain: `BOITATA-` and 16 hex digits of a hash of the run id (chain
/// names have at most 28 characters).
fn chain_name(run_id: &str) -> String {
    format!("{CHAIN_PREFIX}{:016x}", crate::sandbox::run_id_hash(run_id))
}

fn short(e: &FirewallError) -> String {
    match e {
        FirewallError::Command { stderr, .. } => stderr.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_one_word_and_chains_fit_iptables() {
        assert_eq!(rule_comment("0195-ab.c_d"), "boitata-run-0195-ab.c_d");
        assert_eq!(rule_comment("a b\"c"), "boitata-run-a_b_c");
        let chain = chain_name("019a1b2c-0000-7000-8000-000000000000");
        assert!(chain.len() <= 28, "{chain}");
        assert_ne!(chain, chain_name("another run"));
    }
}
