//! Shared test fixtures: a fresh temp home per test, the built binary, the fake agents, and
//! waiting for a condition with a deadline (never a fixed sleep).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_agentctl");

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Copy the program `from` to `to`, by `cp` in a process of its own. Written by this
/// process, its file would be open for writing in whatever child another test's thread forks
/// meanwhile, until that child execs, and running it then fails ("text file busy").
#[allow(dead_code, reason = "used by the fault suite only")]
pub fn copy_program(from: impl AsRef<Path>, to: impl AsRef<Path>) {
    let status = Command::new("cp").arg(from.as_ref()).arg(to.as_ref()).status().unwrap();
    assert!(status.success(), "cp {} {} failed", from.as_ref().display(), to.as_ref().display());
}

pub fn fake_agent() -> String {
    fixtures().join("fake-agent").to_string_lossy().into_owned()
}

/// A temp home (removed on drop) and a clean environment for the binary.
pub struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    /// `AGENTCTL_CONTAINMENT` for every command (unset: the machine decides).
    containment: Option<&'static str>,
}

/// What one run of the binary printed.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!("stdout is not one JSON object ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr)
        })
    }
}

impl Home {
    pub fn new() -> Home {
        Home::under("")
    }

    /// A home at `sub` inside a fresh temp dir (not created: agentctl creates it).
    pub fn under(sub: &str) -> Home {
        let dir = tempfile::Builder::new().prefix("agentctl-test").tempdir().unwrap();
        let home = dir.path().join(sub);
        Home { _dir: dir, home, containment: None }
    }

    /// A home whose tasks run with `AGENTCTL_CONTAINMENT=mode` (`process-group`, `cgroup`).
    #[allow(dead_code, reason = "used by the fault suite only")]
    pub fn contained_by(mode: &'static str) -> Home {
        Home { containment: Some(mode), ..Home::new() }
    }

    pub fn path(&self) -> &Path {
        &self.home
    }

    /// The binary with this home, an isolated config dir and the fake kiro-cli first on PATH.
    pub fn cmd(&self) -> Command {
        self.cmd_at(self.path())
    }

    /// `cmd`, with the home reached through `home` (a bind mount of it, say).
    pub fn cmd_at(&self, home: &Path) -> Command {
        self.cmd_of(Path::new(BIN), home)
    }

    /// `cmd_at`, running `program` (a copy of the binary, say).
    pub fn cmd_of(&self, program: &Path, home: &Path) -> Command {
        let mut c = Command::new(program);
        // The fake kiro-cli first; then agentctl itself, for agents that call it.
        let bin_dir = Path::new(BIN).parent().unwrap();
        let path = format!(
            "{}:{}:{}",
            fixtures().join("path").display(),
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.arg("--home")
            .arg(home)
            .env("PATH", path)
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env_remove("AGENTCTL_HOME")
            .env_remove("AGENTCTL_SESSION")
            .env_remove("AGENTCTL_TOKEN")
            .stdin(Stdio::null());
        match self.containment {
            Some(mode) => c.env("AGENTCTL_CONTAINMENT", mode),
            None => c.env_remove("AGENTCTL_CONTAINMENT"),
        };
        c
    }

    /// Run the binary with `args`; assert it exits with `code`.
    pub fn run(&self, args: &[&str], code: i32) -> Run {
        let out = self.cmd().args(args).output().unwrap();
        check(args, out, code)
    }

    /// `run`, for a command that might hang: killed, and the test failed, after `limit`.
    #[allow(dead_code, reason = "used by the fault suite only")]
    pub fn run_within(&self, limit: Duration, args: &[&str], code: i32) -> Run {
        self.run_at(self.path(), limit, args, code)
    }

    /// `run_within`, with the home reached through `home`.
    #[allow(dead_code, reason = "used by the fault suite only")]
    pub fn run_at(&self, home: &Path, limit: Duration, args: &[&str], code: i32) -> Run {
        let child = self.cmd_at(home).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let pid = child.id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        match rx.recv_timeout(limit) {
            Ok(out) => check(args, out.unwrap(), code),
            Err(_) => {
                // SAFETY: kill on the pid of our own child, which cannot have been reaped.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("agentctl {args:?} hung for {limit:?}");
            }
        }
    }

    /// Make the home (as the first `wait` of a lead does), with no task in it.
    pub fn init(&self) {
        self.run(&["wait", "--timeout", "0s"], 124);
    }

    /// `run --async -- fake-agent ARGS…` and return the token.
    pub fn start(&self, agent_args: &[&str]) -> String {
        let fake = fake_agent();
        self.start_argv(&[&[fake.as_str()], agent_args].concat())
    }

    /// `run --async -- sh -c SCRIPT` and return the token.
    pub fn start_script(&self, script: &str) -> String {
        self.start_argv(&["sh", "-c", script])
    }

    /// The task has started when this returns. A launcher hands back a task whose supervisor has not
    /// said within 5 s that its agent started (a loaded machine) as `starting`: it is waited for.
    pub fn start_argv(&self, argv: &[&str]) -> String {
        let v = self.run(&[&["--json", "run", "--async", "--"], argv].concat(), 0).json();
        let token = v["token"].as_str().unwrap().to_owned();
        if v["status"] == "starting" {
            wait_until(Duration::from_secs(60), "the task to run", || self.status(&token)["status"] != "starting");
        } else {
            assert_eq!(v["status"], "running", "{v}");
        }
        token
    }

    /// Whether every task has ended: none queued, starting or running.
    pub fn all_ended(&self) -> bool {
        ["queued", "starting", "running"]
            .iter()
            .all(|s| self.run(&["--json", "list", "--status", s, "--limit", "1"], 0).json()["count"] == 0)
    }

    pub fn status(&self, token: &str) -> Value {
        let out = self.cmd().args(["--json", "status", token]).output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The saved record of a task (for pids the CLI does not show). A task just handed back may
    /// not be in the database yet: a look at it through the CLI puts it there.
    pub fn record(&self, token: &str) -> Value {
        let read = || self.db().query_row("SELECT record FROM tasks WHERE token = ?1", [token], |r| r.get(0));
        let text: String = read()
            .or_else(|_| {
                self.status(token);
                read()
            })
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// The pid of task `token`'s supervisor, as it writes it in the task's lock file as it
    /// starts (a queued task's too: its record names none yet).
    pub fn supervisor_pid(&self, token: &str) -> i64 {
        let path = self.path().join("tasks").join(token).join("lock");
        let read = || std::fs::read_to_string(&path).unwrap().split_whitespace().next().and_then(|p| p.parse().ok());
        wait_until(Duration::from_secs(60), "the supervisor to write its pid", || read().is_some());
        read().unwrap()
    }

    /// SIGKILL task `token`'s supervisor and wait until it is gone; its pid.
    #[allow(dead_code, reason = "used by the fault and Slurm suites only")]
    pub fn kill_supervisor(&self, token: &str) -> i64 {
        let sup = self.supervisor_pid(token);
        // SAFETY: kill on the supervisor of this test's own task, alive until reaped by init.
        unsafe { libc::kill(sup as i32, libc::SIGKILL) };
        wait_until(Duration::from_secs(10), "the supervisor to die", || !alive(sup));
        sup
    }

    /// The home's database, as a tool outside agentctl would open it.
    pub fn db(&self) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(self.path().join("agentctl.db")).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(30)).unwrap();
        conn
    }
}

pub fn check(args: &[&str], out: Output, code: i32) -> Run {
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(
        run.code, code,
        "agentctl {args:?} exited {} (wanted {code})\nstdout:\n{}\nstderr:\n{}",
        run.code, run.stdout, run.stderr
    );
    run
}

/// Wait until `cond` holds, checking often, failing after `limit` (a hang guard, not a timing claim).
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < end, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: i64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat.rsplit(')').next().map(|r| r.trim_start().chars().next()), Some(Some('Z'))),
        Err(_) => false,
    }
}

/// Pids written by a fake agent to `file` (space separated), once it has written them.
pub fn read_pids(file: &Path) -> Vec<i64> {
    wait_until(Duration::from_secs(20), "the agent to write its pids", || {
        std::fs::read_to_string(file).is_ok_and(|s| s.ends_with('\n'))
    });
    std::fs::read_to_string(file).unwrap().split_whitespace().map(|p| p.parse().unwrap()).collect()
}
