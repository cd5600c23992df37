//! `TaskRecord`: what is known about a task, as saved in its record file.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{Containment, Outcome, Role, Status, TaskCgroup, Token};

/// Milliseconds since the Unix epoch, the timestamp unit of records.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The saved state of one task. Its status is derived: ended, else started, else starting.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskRecord {
    pub token: Token,
    pub role: Role,
    pub session: String,
    /// The first line of the question (or command), shortened for listings.
    pub preview: String,
    pub created_at_ms: u64,
    pub started: Option<Started>,
    pub ended: Option<Ended>,
    /// Waiting for a place in its pool: not started yet, and not about to.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queued: bool,
    /// How many times the agent was run again after a rate-limited run (`retry_on`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// While it waits to run again: when it will (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<u64>,
    /// The rate-limited runs, one line each (`run 1 was rate-limited (exit 75)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limited: Vec<String>,
    /// Where in the log the agent's last run began: its summary is read from there.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub run_start: u64,
    /// What it changed in its worktree, counted when it ended (`--worktree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::worktree::Changes>,
    /// What holds its processes together (set when its agent first starts; none in records of
    /// earlier releases, which had process groups only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<Containment>,
    /// The Slurm job its agent runs in (`backend = "slurm"`), once Slurm listed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<u64>,
    /// Why Slurm holds its job pending (`Resources`, `Priority`…), while it does: the task is
    /// `queued` then, with its pool's place taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_pending: Option<String>,
    /// While it waits for a place: why its pool's limit is the last one read, not the agents
    /// file's now (the file cannot be read, or has no section for the pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_kept: Option<String>,
    /// While it waits because its pool spent its window's limit (`spend`): why, and when the
    /// window frees (ms since the epoch; none: when the pool's running tasks end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spend_held: Option<String>,
    /// Why it waits for memory to start (`min_available_memory`), while it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_short: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frees_at_ms: Option<u64>,
    /// What its agent spent, as its stream said (none: unknown, or not read yet); final once
    /// it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::agent::Usage>,
    /// Its earlier turns, once it was followed up (`ask --to`): the fields above are its
    /// current turn's, its usage the whole conversation's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<super::Turn>,
    /// The tasks it still waits for before it starts (`--after`): it is `queued`, out of its
    /// pool's line, meanwhile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<Token>,
    /// Its `on_end` hook, if it has one: due once its record is final, then run once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<super::HookState>,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// Set once the agent process exists.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Started {
    pub pid: i32,
    pub supervisor_pid: i32,
    /// The supervisor's session id: with `pid` (the agent's process group) it identifies the
    /// task's processes without trusting a pid that may have been reused.
    #[serde(default)]
    pub sid: i32,
    pub at_ms: u64,
}

/// Set once, by whoever records the end first, and never changed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ended {
    pub outcome: Outcome,
    pub at_ms: u64,
    pub line_count: u64,
    /// Something worth knowing about the end (leftover processes ended, a write error).
    pub note: Option<String>,
}

/// Who supervises a task: written into the task's lock file by the supervisor before it starts
/// the agent, so that the task's processes can be found (its session) and the supervisor itself
/// signalled (its pid, checked against its start time) even if it never recorded anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SupervisorId {
    pub pid: i32,
    /// The session the supervisor and every process of the task run in.
    pub sid: i32,
    /// When the process started (clock ticks since boot): a pid reused by another process has
    /// another start time.
    pub start: u64,
    /// The boot it ran in (the kernel's boot id): after a restart none of its numbers mean
    /// anything.
    pub boot: u128,
}

impl SupervisorId {
    /// One line of text: `PID SID START BOOT` (the boot id in hex).
    pub fn to_line(self) -> String {
        format!("{} {} {} {:032x}\n", self.pid, self.sid, self.start, self.boot)
    }

    /// Parse `to_line`'s text (the first line of a lock file); `None` for anything else (an
    /// empty lock file, say).
    pub fn parse(text: &str) -> Option<SupervisorId> {
        let mut f = text.lines().next()?.split_whitespace();
        let (pid, sid, start) = (f.next()?.parse().ok()?, f.next()?.parse().ok()?, f.next()?.parse().ok()?);
        let boot = u128::from_str_radix(f.next()?, 16).ok()?;
        (f.next().is_none() && pid > 1 && sid > 1).then_some(SupervisorId { pid, sid, start, boot })
    }
}

/// What a supervisor keeps in its task's lock file for whoever finds it dead (or stopped): who
/// it is (the first line), then the task's cgroup and Slurm job once they exist.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LockNote {
    pub id: Option<SupervisorId>,
    pub cgroup: Option<TaskCgroup>,
    pub slurm_job: Option<u64>,
}

impl LockNote {
    /// The lock file's text.
    pub fn to_text(&self) -> String {
        let mut text = self.id.map_or("\n".to_owned(), SupervisorId::to_line);
        text.push_str(&self.cgroup.as_ref().map(TaskCgroup::to_lines).unwrap_or_default());
        text.extend(self.slurm_job.map(|job| format!("slurm-job {job}\n")));
        text
    }

    /// Read `to_text`'s text back (what cannot be read is `None`).
    pub fn parse(text: &str) -> LockNote {
        LockNote {
            id: SupervisorId::parse(text),
            cgroup: TaskCgroup::parse(text),
            slurm_job: text.lines().find_map(|l| l.strip_prefix("slurm-job ")?.trim().parse().ok()),
        }
    }
}

impl TaskRecord {
    /// The task's current status.
    pub fn status(&self) -> Status {
        match (&self.ended, &self.started) {
            (Some(e), _) => e.outcome.status(),
            // Waiting for a place: before its first run, or between two (a rate-limited run).
            (None, _) if self.queued || self.slurm_pending.is_some() => Status::Queued,
            (None, Some(_)) => Status::Running,
            (None, None) => Status::Starting,
        }
    }

    /// Milliseconds from start (or creation) to end (or `now_ms`).
    pub fn elapsed_ms(&self, now_ms: u64) -> u64 {
        let from = self.started.as_ref().map_or(self.created_at_ms, |s| s.at_ms);
        let to = self.ended.as_ref().map_or(now_ms, |e| e.at_ms);
        to.saturating_sub(from)
    }
}

/// Shorten text to one line of at most `max` characters, for listings.
pub fn one_line_preview(text: &str, max: usize) -> String {
    let line = text.split(['\n', '\r']).map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let more = line.chars().count() > max || text.trim().lines().count() > 1;
    let mut out: String = line.chars().take(max).map(|c| if c.is_control() { ' ' } else { c }).collect();
    if more {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> TaskRecord {
        TaskRecord {
            token: Token::parse("abc123").unwrap(),
            role: Role::parse("r").unwrap(),
            session: "default".into(),
            preview: String::new(),
            created_at_ms: 1_000,
            started: None,
            ended: None,
            queued: false,
            retries: 0,
            retry_at_ms: None,
            rate_limited: Vec::new(),
            run_start: 0,
            changes: None,
            containment: None,
            slurm_job: None,
            slurm_pending: None,
            limit_kept: None,
            usage: None,
            spend_held: None,
            memory_short: None,
            frees_at_ms: None,
            turns: Vec::new(),
            waiting_for: Vec::new(),
            hook: None,
        }
    }

    #[test]
    fn status_is_derived_from_what_happened() {
        let mut r = rec();
        assert_eq!(r.status(), Status::Starting);
        r.started = Some(Started { pid: 5, supervisor_pid: 4, sid: 3, at_ms: 2_000 });
        assert_eq!(r.status(), Status::Running);
        assert_eq!(r.elapsed_ms(5_000), 3_000);
        r.ended = Some(Ended { outcome: Outcome::Lost, at_ms: 4_000, line_count: 0, note: None });
        assert_eq!(r.status(), Status::Lost);
        assert_eq!(r.elapsed_ms(9_000), 2_000);
    }

    #[test]
    fn supervisor_ids_round_trip_and_junk_is_refused() {
        let id = SupervisorId { pid: 42, sid: 41, start: 123_456, boot: 0x5e1f_0000_0000_0000_0000_0000_0000_0001 };
        assert_eq!(SupervisorId::parse(&id.to_line()), Some(id));
        for junk in ["", "1 2 3", "42 41 1", "42 41 x 0", "42 41 1 zz", "42 41 1 0 9", "-5 41 1 0"] {
            assert_eq!(SupervisorId::parse(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn lock_notes_round_trip() {
        let id = SupervisorId { pid: 42, sid: 41, start: 7, boot: 9 };
        let cgroup = TaskCgroup { path: "/sys/fs/cgroup/agentctl/abc123.42".into(), v1: Vec::new() };
        let note = LockNote { id: Some(id), cgroup: Some(cgroup), slurm_job: Some(77) };
        assert_eq!(LockNote::parse(&note.to_text()), note);
        let early = LockNote { id: Some(id), ..LockNote::default() };
        assert_eq!(LockNote::parse(&early.to_text()), early);
        assert_eq!(LockNote::parse(""), LockNote::default());
    }

    #[test]
    fn previews_are_one_short_line() {
        assert_eq!(one_line_preview("hello", 10), "hello");
        assert_eq!(one_line_preview("\n  first\nsecond", 10), "first…");
        assert_eq!(one_line_preview("abcdefghijkl", 5), "abcde…");
        assert_eq!(one_line_preview("", 5), "");
    }
}
