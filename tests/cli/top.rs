//! `agentctl top` for real, in tmux (a private server): tasks shown, output as it comes, a halt
//! from the view, and the terminal given back as it was; and the progress line of a waiting
//! `run` on a terminal.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{BIN, Home, fixtures, wait_until};

/// A tmux server of this test's own (its socket in the home), 80×24, running bash.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// The shell finds agentctl on its PATH and the home in AGENTCTL_HOME, so that a short
    /// command line is typed (a long one would wrap in 80 columns).
    fn start(h: &Home) -> Tmux {
        let t = Tmux::running(h, "bash --norc --noprofile");
        t.keys(&["PS1='$ '; clear", "Enter"]);
        wait_until(Duration::from_secs(20), "a clear screen with the prompt", || t.pane().trim() == "$");
        t
    }

    /// A server whose one pane runs `shell_command`.
    fn running(h: &Home, shell_command: &str) -> Tmux {
        let t = Tmux { socket: h.path().join("tmux.sock") };
        let c = h.cmd();
        let mut new = t.command();
        // No tmux configuration of the machine's.
        new.args(["-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24", shell_command]);
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                new.env(k, v);
            }
        }
        let bin_dir = Path::new(BIN).parent().unwrap();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        new.env("TERM", "xterm-256color").env_remove("NO_COLOR").env("PATH", path).env("AGENTCTL_HOME", h.path());
        assert!(new.status().unwrap().success(), "tmux could not start");
        t
    }

    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    fn keys(&self, keys: &[&str]) {
        assert!(self.command().arg("send-keys").args(keys).status().unwrap().success());
    }

    fn pane(&self) -> String {
        // Wrapped rows joined (-J), as they were written.
        let out = self.command().args(["capture-pane", "-pJ"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn cursor_shown(&self) -> bool {
        let out = self.command().args(["display-message", "-p", "#{cursor_flag}"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    fn wait_for(&self, what: &str, text: &str) -> String {
        let mut pane = String::new();
        wait_until(Duration::from_secs(20), what, || {
            pane = self.pane();
            pane.contains(text)
        });
        pane
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
    }
}

fn touch(p: &Path) {
    std::fs::write(p, "").unwrap();
}

#[test]
fn a_waiting_run_says_its_agents_step_and_spend_on_its_progress_line() {
    let h = Home::new();
    let t = Tmux::start(&h);
    let gate = h.path().join("gate");
    let claude = fixtures().join("stream/claude");
    t.keys(&[&format!("C={} G={}; clear", claude.display(), gate.display()), "Enter"]);
    t.keys(&["agentctl run --sync -- $C steps $G", "Enter"]);
    let pane = t.wait_for("the step on the progress line", " · Bash: sleep 5 · ~$0.0009");
    assert!(pane.contains("(run) running "), "{pane}");
    touch(&gate);
    let pane = t.wait_for("the answer", "All done: the change is good.");
    assert!(pane.contains("usage: $0.0123 · 320 tokens · 2 turns"), "{pane}");
}

#[test]
fn top_shows_the_tasks_and_their_output_halts_one_and_gives_the_terminal_back() {
    let h = Home::new();
    for i in 0..3 {
        h.run(&["run", "--sync", "--", "echo", &format!("finished {i}")], 0);
    }
    let trigger = h.path().join("trigger");
    let script = format!(
        "echo started; until [ -e '{t}' ]; do sleep 0.01; done; echo NEW-OUTPUT-ARRIVED; sleep 300",
        t = trigger.display()
    );
    let running = h.start_script(&script);
    let asking = h.start_script("agentctl ask-lead 'Which branch?' --choices main,dev");
    wait_until(Duration::from_secs(20), "the question", || h.status(&asking)["pending_question"].is_object());

    let tmux = Tmux::start(&h);
    let line = "agentctl top";
    tmux.keys(&["-l", line]);
    let before = tmux.wait_for("the command line", " top");
    tmux.keys(&["Enter"]);
    let pane = tmux.wait_for("the view", " running · ");
    assert!(pane.contains("2 running") && pane.contains("3 ended"), "{pane}");
    assert!(pane.contains(&running) && pane.contains("ASKS: Which branch?"), "{pane}");
    // The running task is selected first: its output shows under the table as it comes.
    tmux.wait_for("its output so far", "started");
    let t0 = Instant::now();
    touch(&trigger);
    tmux.wait_for("its new output", "NEW-OUTPUT-ARRIVED");
    eprintln!("new output shown {:?} after it was written", t0.elapsed());

    tmux.keys(&["h"]);
    tmux.wait_for("the confirmation", &format!("Halt task {running}"));
    tmux.keys(&["y"]);
    wait_until(Duration::from_secs(20), "the halt", || h.status(&running)["status"] == "cancelled");
    tmux.wait_for("the halt's notice", &format!("task {running} cancelled"));

    tmux.keys(&["q"]);
    let after = tmux.wait_for("the prompt again", &format!("$ {line}\n$"));
    // The screen as it was before, with only the next prompt added; the cursor shown.
    let lines = |s: &str| s.lines().map(str::trim_end).filter(|l| !l.is_empty()).map(str::to_owned).collect::<Vec<_>>();
    let (before, after) = (lines(&before), lines(&after));
    assert_eq!(after[..before.len()], before[..], "{after:?}");
    assert_eq!(after[before.len()..], ["$"], "{after:?}");
    assert!(tmux.cursor_shown());
    h.run(&["halt", &asking, "--grace", "0s"], 0);
}

impl Tmux {
    /// Row `n` of the screen, as shown.
    fn row(&self, n: usize) -> String {
        self.pane().lines().nth(n).unwrap_or_default().to_owned()
    }

    /// The process the pane's shell runs (`agentctl top`), from the shell's own children.
    fn child_pid(&self) -> i64 {
        let out = self.command().args(["display-message", "-p", "#{pane_pid}"]).output().unwrap();
        let shell = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
        children.split_whitespace().next().expect("the shell runs top").parse().unwrap()
    }

    /// `agentctl top` typed and started; its pid.
    fn top(&self) -> i64 {
        self.keys(&["-l", "agentctl top"]);
        self.wait_for("the command line", " top");
        self.keys(&["Enter"]);
        self.wait_for("the view", " running · ");
        self.child_pid()
    }
}

/// SIGKILLs a process of the test's own when dropped.
struct Killing(i64);

impl Drop for Killing {
    fn drop(&mut self) {
        if crate::common::alive(self.0) {
            // SAFETY: kill on a process this test started, still alive.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
}

/// Halts a task when dropped, so that a failed test leaves no task running.
struct Halting<'a>(&'a Home, String);

impl Drop for Halting<'_> {
    fn drop(&mut self) {
        let _ = self.0.cmd().args(["halt", &self.1, "--grace", "0s"]).output();
    }
}

/// The bytes process `pid` has read, from any file, since it started.
fn bytes_read(pid: i64) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines().find_map(|l| l.strip_prefix("rchar: ")).unwrap().trim().parse().unwrap()
}

/// The number in a log view's first row, `line N`.
fn first_line_shown(tmux: &Tmux) -> Option<u64> {
    let row = tmux.row(1);
    row.trim_matches(|c: char| c == '│' || c.is_whitespace()).strip_prefix("line ")?.parse().ok()
}

#[test]
fn top_ends_when_its_terminal_hangs_up_though_no_sighup_reaches_it() {
    let h = Home::new();
    h.init();
    // The session's leader ignores the hang-up's SIGHUP, which goes to it alone, and stays:
    // nothing passes a SIGHUP on to top (as when a shell that does not is killed).
    let pidfile = h.path().join("top.pid");
    let command = format!("sh -c 'trap \"\" HUP; agentctl top </dev/tty & echo $! > {}; wait'", pidfile.display());
    let t = Tmux::running(&h, &command);
    let top = crate::common::read_pids(&pidfile)[0];
    // Should it fail, the top it started does not spin on for ever.
    let _top = Killing(top);
    t.wait_for("the view", "TOKEN");
    // The terminal goes away (tmux closes the pane's pty) while keys still come.
    assert!(t.command().args(["send-keys", "-N", "200", "j"]).status().unwrap().success());
    assert!(t.command().arg("kill-server").status().unwrap().success());
    wait_until(Duration::from_secs(20), "top to end with its terminal", || !crate::common::alive(top));
}

#[test]
fn the_log_view_pages_back_to_the_first_line_of_a_long_log_and_stays_there_while_output_comes() {
    let h = Home::new();
    let trigger = h.path().join("trigger");
    let script = format!(
        "seq -f 'line %.0f' 1 200000; until [ -e '{t}' ]; do sleep 0.01; done
         i=200001; while :; do echo line $i; i=$((i+1)); sleep 0.05; done",
        t = trigger.display()
    );
    let task = h.start_script(&script);
    let _halt = Halting(&h, task.clone());
    wait_until(Duration::from_secs(30), "the long output", || h.status(&task)["line_count"] == 200_000);
    let tmux = Tmux::start(&h);
    tmux.top();
    tmux.keys(&["Enter"]);
    tmux.wait_for("the log view", "following");
    assert_eq!(first_line_shown(&tmux), Some(199_980), "{}", tmux.pane());
    // Far past the last thousand lines, 20 rows a page (a hundred keys at a time: tmux loses
    // some of more).
    for n in 1..=6 {
        tmux.keys(&["-N", "100", "PageUp"]);
        let want = 199_980 - n * 2000;
        wait_until(Duration::from_secs(30), "100 pages up", || first_line_shown(&tmux) == Some(want));
    }
    assert!(tmux.pane().contains("scrolled back, at 93%"), "{}", tmux.pane());
    touch(&trigger);
    let first = first_line_shown(&tmux);
    let title = tmux.row(0);
    // New output comes, and the title's count with it: the rows shown stay.
    wait_until(Duration::from_secs(30), "more output counted in the title", || tmux.row(0) != title);
    assert_eq!(first_line_shown(&tmux), first, "{}", tmux.pane());
    tmux.keys(&["g"]);
    wait_until(Duration::from_secs(20), "the first line", || first_line_shown(&tmux) == Some(1));
    tmux.keys(&["-N", "3", "PageDown"]);
    wait_until(Duration::from_secs(20), "three pages down", || first_line_shown(&tmux) == Some(61));
    tmux.keys(&["f"]);
    tmux.wait_for("following again", "following");
    tmux.keys(&["q"]);
}

#[test]
fn top_reads_of_a_long_line_what_it_shows_not_the_whole_line() {
    let h = Home::new();
    // A row of a line is a block of it (64 KiB): a screenful of them is 1.3 MB.
    let size = 64_000_000u64;
    let task = h.start_script(&format!("head -c {size} /dev/zero | tr '\\0' x; echo; echo WRITTEN"));
    h.run(&["await", &task], 0);
    let tmux = Tmux::start(&h);
    let top = tmux.top();
    tmux.wait_for("the line under the table", "xxxxxxxxxxxxxxxx");
    let read = bytes_read(top);
    assert!(read < size / 4, "top read {read} bytes of a {size}-byte log to show the last rows of it");
    tmux.wait_for("the output's end under the table", "WRITTEN");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the log view", "following");
    tmux.keys(&["g"]);
    tmux.wait_for("its first rows", "scrolled back");
    tmux.keys(&["-N", "2", "PageDown"]);
    tmux.keys(&["f"]);
    tmux.wait_for("its end again", "following");
    let read = bytes_read(top);
    eprintln!("top read {read} bytes of a {size}-byte log");
    assert!(read < size / 4, "top read {read} bytes of a {size}-byte log to show a few rows of it");
    tmux.keys(&["q"]);
}
