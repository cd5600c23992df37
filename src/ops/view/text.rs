//! A task as people read it: its headline, how it ended, and the whole of `status`.

use super::*;

impl TaskView {
    /// One line: the task, its status and, once ended, how long it ran and how it ended.
    pub fn headline(&self) -> String {
        let mut out = format!("task {} ({}) {}", self.token, self.role, self.status);
        if self.status.is_final() {
            out.push_str(&format!(" in {}", human_duration(self.elapsed_ms)));
            if self.attempts > 1 {
                out.push_str(&format!(" after {} runs", self.attempts));
            }
            if let Some(c) = self.exit_code {
                out.push_str(&format!(", exit {c}"));
            }
            if let Some(s) = self.signal {
                out.push_str(&format!(", signal {s}"));
            }
            out.push_str(&format!(", {} line(s) of output", self.line_count));
        }
        out
    }

    /// The headline, with the error and note on lines of their own: how the task ended.
    pub fn ending(&self) -> String {
        let mut out = self.headline();
        out.push('\n');
        for (label, value) in [("error", &self.error), ("note", &self.note)] {
            if let Some(text) = value {
                out.push_str(&format!("{label}: {text}\n"));
            }
        }
        out
    }

    /// The view as readable text: a headline, error and note, the log path, then the summary
    /// (or, while running, the progress line and what to do next).
    pub fn text(&self) -> String {
        let mut out = self.ending();
        out.push_str(&format!("log: {}\n", self.log_path.display()));
        if let Some(wt) = &self.worktree {
            let size = self.worktree_bytes.map(|b| format!(" ({})", human_bytes(b))).unwrap_or_default();
            out.push_str(&format!("worktree: {}{size}\n", wt.display()));
        }
        if let Some(c) = &self.changes {
            out.push_str(&format!("changes: {}\n", c.line()));
        }
        if let Some(job) = &self.slurm {
            out.push_str(&format!("slurm: {job}\n"));
        }
        if let Some(c) = &self.containment {
            let mut line = match c {
                Containment::Cgroup { cgroup, limits } if limits.is_empty() => {
                    format!("cgroup {}", cgroup.path.display())
                }
                Containment::Cgroup { cgroup, limits } => format!("cgroup {} ({limits})", cgroup.path.display()),
                Containment::ProcessGroup { why } => format!("process group (no cgroup: {why})"),
            };
            if let (Some(n), Some(m)) = (self.processes, self.memory_bytes) {
                line.push_str(&format!("; {n} process(es), {} of memory", human_bytes(m)));
            }
            out.push_str(&format!("containment: {line}\n"));
        }
        if let Some(s) = &self.sandbox {
            out.push_str(&format!("sandbox: {}\n", s.line()));
        }
        out.push_str(&self.doing());
        match (&self.summary, self.status.is_final()) {
            (Some(s), true) if !s.is_empty() => out.push_str(&format!("\n{s}\n")),
            (Some(s), false) => out.push_str(&format!("{s}\n")),
            _ => {}
        }
        if let Some(m) = self.message.as_ref().filter(|_| !self.status.is_final()) {
            out.push_str(&format!("{m}\n"));
        }
        out
    }
}

impl TaskView {
    /// Its `usage:` line (what it spent, tokens split, model, the agent's session), and while
    /// it runs its `step:` (and how long it has been on it) and a short todo list.
    fn doing(&self) -> String {
        let mut out = String::new();
        if !self.turns.is_empty() {
            out.push_str(&format!("conversation: turn {}; before it:\n", self.turn));
        }
        for t in &self.turns {
            let spent = t.usage.as_ref().map(|u| format!(" ({})", u.brief())).unwrap_or_default();
            out.push_str(&format!("  {}. {} → {}{spent}: {}\n", t.turn, t.question, t.status, t.answer));
        }
        if let Some(u) = &self.usage {
            let mut parts = vec![u.brief()];
            let split = token_split(u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens);
            if !split.is_empty() {
                parts.push(format!("tokens {split}"));
            }
            parts.extend(u.model.clone());
            parts.extend(u.session_id.as_ref().map(|s| format!("session {s}")));
            let so_far = if self.status.is_final() { "" } else { " (so far)" };
            out.push_str(&format!("usage: {}{so_far}\n", parts.join(" · ")));
        }
        if self.status.is_final() {
            return out;
        }
        if let Some(s) = &self.step {
            let since = unix_ms(SystemTime::now()).saturating_sub(s.at_ms);
            out.push_str(&format!("step: {} (for {})\n", s.what, human_duration(since)));
        }
        // A short list: its first 8 items, each on a line.
        out.push_str(if self.todo.is_empty() { "" } else { "todo:\n" });
        for t in self.todo.iter().take(8) {
            let mark =
                [("completed", "x"), ("in_progress", ">")].iter().find(|(s, _)| *s == t.status).map_or(" ", |m| m.1);
            out.push_str(&format!("  [{mark}] {}\n", crate::agent::stream::shorten(&t.text, 100)));
        }
        if self.todo.len() > 8 {
            out.push_str(&format!("  … {} more\n", self.todo.len() - 8));
        }
        out
    }
}
