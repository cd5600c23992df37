//! Admission by memory (`min_available_memory`): how much memory the machine has available
//! now (`MemAvailable`), or less where agentctl runs in a cgroup with a memory limit (what the
//! limit leaves), and whether a task may start on it. Tasks that started a moment ago have not
//! taken their memory yet: each of them counts as taking the minimum, so that one reading never
//! starts two tasks where only one fits.

use crate::task::Bytes;

/// How long after its start a task's memory is not yet seen in what is available.
pub(super) const SETTLING_MS: u64 = 15_000;

/// The memory available now, and where that figure comes from.
pub(super) fn available() -> Option<(u64, &'static str)> {
    let machine = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| meminfo_available(&m));
    let cgroup = cgroup_room();
    match (machine, cgroup) {
        (Some(m), Some(c)) if c < m => Some((c, "in agentctl's cgroup")),
        (Some(m), _) => Some((m, "on this machine")),
        (None, Some(c)) => Some((c, "in agentctl's cgroup")),
        (None, None) => None,
    }
}

/// Why a task may not start now with `min` available for it and `settling` tasks just started,
/// if it may not.
pub(super) fn short(min: Bytes, settling: usize) -> Option<String> {
    let (free, place) = available()?;
    short_of(free, place, min, settling)
}

/// `short`, with `free` available `place`.
fn short_of(free: u64, place: &str, min: Bytes, settling: usize) -> Option<String> {
    let need = min.0.saturating_mul(settling as u64 + 1);
    (free < need).then(|| {
        let just = match settling {
            0 => String::new(),
            n => format!(" (and as much for each of {n} task(s) just started)"),
        };
        let gib = free as f64 / (1u64 << 30) as f64;
        format!("waiting for memory: {gib:.1} GiB available {place}, its pool needs {min} free to start one{just}")
    })
}

/// `MemAvailable` of a `/proc/meminfo`, in bytes.
fn meminfo_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What the memory limit of this process's cgroup (v2) leaves, if it has one.
fn cgroup_room() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let dir = std::path::Path::new(root).join(path.trim_start_matches('/'));
        let Ok(max) = std::fs::read_to_string(dir.join("memory.max")) else { continue };
        let max: u64 = max.trim().parse().ok()?;
        let current: u64 = std::fs::read_to_string(dir.join("memory.current")).ok()?.trim().parse().ok()?;
        // Page cache the kernel can take back counts as room, as MemAvailable counts it.
        let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
        let reclaimable = stat
            .lines()
            .find_map(|l| l.strip_prefix("inactive_file "))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
        return Some(max.saturating_sub(current.saturating_sub(reclaimable)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_meminfo_and_a_start_waits_for_room_for_each_settling_task() {
        let m = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(meminfo_available(m), Some(2048 * 1024));
        assert_eq!(meminfo_available("MemTotal: 1 kB\n"), None);
        assert!(available().is_some_and(|(free, _)| free > 0), "this machine says what it has available");
        let g = |n: u64| Bytes(n << 30);
        assert_eq!(short_of(5 << 30, "here", g(4), 0), None);
        assert_eq!(
            short_of(5 << 30, "here", g(4), 1).unwrap(),
            "waiting for memory: 5.0 GiB available here, its pool needs 4G free to start one \
             (and as much for each of 1 task(s) just started)"
        );
        assert!(short_of(3 << 30, "here", g(4), 0).unwrap().starts_with("waiting for memory: 3.0 GiB"));
    }
}
