//! `agentctl top` for real, in tmux (a private server): tasks shown, output as it comes, a halt
//! from the view, and the terminal given back as it was.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{BIN, Home, wait_until};

/// A tmux server of this test's own (its socket in the home), 80×24, running bash.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// The shell finds agentctl on its PATH and the home in AGENTCTL_HOME, so that a short
    /// command line is typed (a long one would wrap in 80 columns).
    fn start(h: &Home) -> Tmux {
        let t = Tmux { socket: h.path().join("tmux.sock") };
        let c = h.cmd();
        let mut new = t.command();
        // No tmux configuration of the machine's.
        new.args(["-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24", "bash --norc --noprofile"]);
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                new.env(k, v);
            }
        }
        let bin_dir = Path::new(BIN).parent().unwrap();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        new.env("TERM", "xterm-256color").env_remove("NO_COLOR").env("PATH", path).env("AGENTCTL_HOME", h.path());
        assert!(new.status().unwrap().success(), "tmux could not start");
        t.keys(&["PS1='$ '; clear", "Enter"]);
        wait_until(Duration::from_secs(20), "a clear screen with the prompt", || t.pane().trim() == "$");
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
