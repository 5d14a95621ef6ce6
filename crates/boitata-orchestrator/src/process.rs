//! Facts about processes on this machine, from `/proc` (Linux): whether a sandbox's
//! owner is still running.

/// Where a process id means something: this machine's host name and the PID namespace
/// of this process (e.g. `vm pid:[4026531836]`), as the
/// [`LABEL_HOST`](crate::sandbox::LABEL_HOST) label records it. Two processes whose
/// scopes differ cannot judge each other's pids: the reaper leaves such sandboxes
/// alone rather than take a live owner in another PID namespace for a dead one.
pub fn host_name() -> String {
    boitata_tools::process::owner_scope()
}

/// The fields of `/proc/PID/stat` after the command name: `state` is the first, the
/// start time (clock ticks since boot) the twentieth.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces and parentheses itself.
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// When process `pid` started, in clock ticks since boot; `None` if it does not exist.
pub fn start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// Whether process `pid` exists and is not a zombie; when `started` is given, also
/// that it is the process that started then (and not a later one given the same pid).
pub fn alive(pid: u32, started: Option<u64>) -> bool {
    let Some(fields) = stat_fields(pid) else {
        return false;
    };
    let running = fields
        .first()
        .is_some_and(|state| state != "Z" && state != "X");
    let same = match started {
        Some(expected) => fields.get(19).and_then(|s| s.parse::<u64>().ok()) == Some(expected),
        None => true,
    };
    running && same
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_scope_names_the_pid_namespace() {
        let ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
        assert!(
            host_name().ends_with(&format!(" {}", ns.display())),
            "{}",
            host_name()
        );
    }

    #[test]
    fn this_process_is_alive_and_a_finished_child_is_not() {
        let me = std::process::id();
        let started = start_time(me);
        assert!(started.is_some());
        assert!(alive(me, started));
        assert!(alive(me, None));
        assert!(
            !alive(me, started.map(|s| s + 1)),
            "another start time is another process"
        );
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!alive(pid, None));
        assert!(!host_name().is_empty());
    }
}
