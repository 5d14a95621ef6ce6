//! Facts about processes on this machine, from `/proc` (Linux): whether a sandbox's
//! owner is still running.

/// This machine's host name, as the [`LABEL_HOST`](crate::sandbox::LABEL_HOST) label
/// records it.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
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
