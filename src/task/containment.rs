//! How a task's processes are held together and limited: its resource `Limits` (from its
//! template or pool) and the `Containment` in force, as saved in its record.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize};

/// The `memory`, `cpus` and `pids` limits of one task (each of its runs), enforced by its cgroup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Limits {
    /// Bytes of memory its processes may use together (swap included); past it the kernel's
    /// OOM killer ends one of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// CPUs' worth of time per second its processes may use together (`1.5`: one and a half).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// How many processes (and threads) it may have at once; a fork past it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
}

/// The most CPUs a limit may name.
const MOST_CPUS: f64 = 4096.0;

impl Limits {
    /// Check the settings of a template or pool (`where_` names it for the message).
    pub fn from_settings(
        memory: Option<Bytes>,
        cpus: Option<f64>,
        pids: Option<u64>,
        where_: &str,
    ) -> Result<Limits, String> {
        if memory.is_some_and(|m| m.0 < 1 << 20) {
            return Err(format!("{where_}: memory must be at least 1M (a size like \"512M\" or \"2G\")"));
        }
        if cpus.is_some_and(|c| !(0.01..=MOST_CPUS).contains(&c)) {
            return Err(format!("{where_}: cpus must be from 0.01 to {MOST_CPUS} (like 1.5)"));
        }
        if pids == Some(0) {
            return Err(format!("{where_}: pids must be at least 1"));
        }
        Ok(Limits { memory_bytes: memory.map(|m| m.0), cpus, pids })
    }

    /// These limits, each unset one taken from `fallback` (a template's over its pool's).
    pub fn or(self, fallback: &Limits) -> Limits {
        Limits {
            memory_bytes: self.memory_bytes.or(fallback.memory_bytes),
            cpus: self.cpus.or(fallback.cpus),
            pids: self.pids.or(fallback.pids),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }
}

impl fmt::Display for Limits {
    /// `memory 100M, cpus 1.5, pids 64`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(m) = self.memory_bytes {
            parts.push(format!("memory {}", Bytes(m)));
        }
        if let Some(c) = self.cpus {
            parts.push(format!("cpus {c}"));
        }
        if let Some(p) = self.pids {
            parts.push(format!("pids {p}"));
        }
        f.write_str(&parts.join(", "))
    }
}

/// A size in `agents.toml`: bytes as a number, or text like `512M`, `2G`, `100MiB` (K, M, G, T
/// are powers of 1024, as in systemd and Docker).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl Bytes {
    pub fn parse(text: &str) -> Result<Bytes, String> {
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (digits, unit) = t.split_at(split);
        let shift = match unit.trim_start().to_ascii_uppercase().trim_end_matches('B').trim_end_matches('I') {
            "" => 0,
            "K" => 10,
            "M" => 20,
            "G" => 30,
            "T" => 40,
            _ => u32::MAX,
        };
        let n: Option<u64> = digits.parse().ok();
        match n.and_then(|n| n.checked_mul(1u64.checked_shl(shift)?)) {
            Some(b) if !digits.is_empty() => Ok(Bytes(b)),
            _ => Err(format!("`{text}` is not a size; give one like \"512M\", \"2G\" or a number of bytes")),
        }
    }
}

impl fmt::Display for Bytes {
    /// The largest unit that divides it: `100M`, `1536K`, `2G`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = [(40, "T"), (30, "G"), (20, "M"), (10, "K")]
            .into_iter()
            .find(|(s, _)| self.0 != 0 && self.0.is_multiple_of(1 << s));
        match unit {
            Some((s, u)) => write!(f, "{}{u}", self.0 >> s),
            None => write!(f, "{} bytes", self.0),
        }
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Bytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size like \"512M\" or a number of bytes")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Bytes, E> {
                Ok(Bytes(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Bytes, E> {
                u64::try_from(n).map(Bytes).map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Bytes, E> {
                Bytes::parse(s).map_err(E::custom)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// A task's own cgroup: its directory in the cgroup v2 hierarchy (which tracks and ends its
/// processes) and, on a hybrid host, the v1 directories that carry its limits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCgroup {
    pub path: PathBuf,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub v1: Vec<PathBuf>,
}

impl TaskCgroup {
    /// Lines for the task's lock file, after its supervisor's id: `cgroup PATH`, `cgroup-v1 PATH`.
    pub fn to_lines(&self) -> String {
        let mut s = format!("cgroup {}\n", self.path.display());
        for p in &self.v1 {
            s.push_str(&format!("cgroup-v1 {}\n", p.display()));
        }
        s
    }

    /// Read `to_lines`' lines back out of a lock file's text (other lines are skipped).
    pub fn parse(text: &str) -> Option<TaskCgroup> {
        let mut path = None;
        let mut v1 = Vec::new();
        for line in text.lines() {
            if let Some(p) = line.strip_prefix("cgroup ") {
                path = Some(PathBuf::from(p));
            } else if let Some(p) = line.strip_prefix("cgroup-v1 ") {
                v1.push(PathBuf::from(p));
            }
        }
        Some(TaskCgroup { path: path?, v1 })
    }
}

/// What holds a task's processes together, so that all of them can be found and ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Containment {
    /// Its own cgroup: every process it starts, however it detaches or whoever it becomes.
    Cgroup {
        cgroup: TaskCgroup,
        #[serde(default, skip_serializing_if = "Limits::is_empty")]
        limits: Limits,
    },
    /// Its agent's process group, its supervisor's session and what the supervisor adopts as a
    /// subreaper: a process that leaves the session is lost with a killed supervisor.
    ProcessGroup {
        /// Why no cgroup was made.
        why: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        for (text, want) in [
            ("1048576", 1 << 20),
            ("100M", 100 << 20),
            ("100MB", 100 << 20),
            ("100MiB", 100 << 20),
            ("2g", 2 << 30),
            ("512 K", 512 << 10),
            ("1T", 1 << 40),
        ] {
            assert_eq!(Bytes::parse(text), Ok(Bytes(want)), "{text}");
        }
        for bad in ["", "M", "-5M", "1.5G", "12X", "99999999999T"] {
            assert!(Bytes::parse(bad).unwrap_err().contains("512M"), "{bad}");
        }
        assert_eq!(Bytes(100 << 20).to_string(), "100M");
        assert_eq!(Bytes(1536 << 10).to_string(), "1536K");
        assert_eq!(Bytes(1000).to_string(), "1000 bytes");
    }

    #[test]
    fn limits_are_checked_and_merged() {
        let l = Limits::from_settings(Some(Bytes(100 << 20)), Some(1.5), None, "x").unwrap();
        assert_eq!(l.to_string(), "memory 100M, cpus 1.5");
        let pool = Limits { pids: Some(64), cpus: Some(4.0), ..Limits::default() };
        assert_eq!(l.or(&pool).to_string(), "memory 100M, cpus 1.5, pids 64");
        assert!(Limits::default().is_empty());
        for (m, c, p) in [
            (Some(Bytes(1000)), None, None),
            (None, Some(0.0), None),
            (None, Some(f64::NAN), None),
            (None, None, Some(0)),
        ] {
            let e = Limits::from_settings(m, c, p, "[agents.w]").unwrap_err();
            assert!(e.starts_with("[agents.w]: "), "{e}");
        }
    }

    #[test]
    fn cgroups_round_trip_through_the_lock_file() {
        let cg = TaskCgroup {
            path: "/sys/fs/cgroup/a b/agentctl/abc123.42".into(),
            v1: vec!["/sys/fs/cgroup/memory/x".into()],
        };
        let text = format!("42 41 1 0\n{}", cg.to_lines());
        assert_eq!(TaskCgroup::parse(&text), Some(cg));
        assert_eq!(TaskCgroup::parse("42 41 1 0\n"), None);
    }
}
