//! Tasks whose agent runs on a Slurm cluster (`backend = "slurm"`): against the one-node
//! cluster `scripts/test` starts as root (`scripts/slurm-cluster`), named by `SLURM_CONF`.

#[allow(dead_code)]
#[path = "../cli/common.rs"]
mod common;

use std::ops::Deref;
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

mod conversations;

use common::{Home, alive, wait_until};
use serde_json::Value;

/// The node's CPUs: each test takes at most one at a time, but for those that take them all,
/// which run alone.
static NODE: RwLock<()> = RwLock::new(());

enum Turn {
    Shared(#[allow(dead_code, reason = "held")] RwLockReadGuard<'static, ()>),
    Whole(#[allow(dead_code, reason = "held")] RwLockWriteGuard<'static, ()>),
}

/// A test's home on the cluster, with its turn on the node; whatever of it is still open at
/// the end (a failed assertion, say) is halted, so that no job of it holds the node after.
struct Cluster {
    home: Home,
    _turn: Turn,
}

impl Deref for Cluster {
    type Target = Home;
    fn deref(&self) -> &Home {
        &self.home
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.home.path().join("agentctl.db").exists() {
            return;
        }
        let tasks: Vec<(String, bool, String)> = {
            let db = self.home.db();
            let mut stmt = db
                .prepare("SELECT token, ended_at_ms IS NULL, specs.spec FROM tasks JOIN specs USING (token)")
                .unwrap();
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect()
        };
        for (token, open, spec) in tasks {
            if open {
                let _ = self.home.cmd().args(["halt", &token, "--grace", "1s"]).output();
            }
            // And whatever job of it Slurm may still run (a test that failed half-way).
            if let Some(name) = serde_json::from_str::<Value>(&spec)
                .ok()
                .and_then(|s| s["backend"]["job_name"].as_str().map(String::from))
            {
                let _ = Command::new("scancel").args(["--quiet", &format!("--name={name}")]).output();
            }
        }
    }
}

/// Fail (never skip) without a cluster, saying what is needed.
fn cluster() {
    let conf = std::env::var("SLURM_CONF").unwrap_or_default();
    let up = !conf.is_empty()
        && Command::new("sinfo").args(["--noheader", "--format=%t"]).output().is_ok_and(|o| o.status.success());
    assert!(
        up,
        "these tests need a Slurm cluster named by SLURM_CONF (`scripts/slurm-cluster up DIR` starts a one-node one, \
         as root; scripts/test does it when run as root)"
    );
}

/// A home whose roles run the same command here (`here`) and on the cluster (`there`), and a
/// SIGTERM-trapping agent on the cluster (`trap`); with a CPU of the node.
fn home() -> Cluster {
    let turn = Turn::Shared(NODE.read().unwrap_or_else(|e| e.into_inner()));
    Cluster { home: agents(), _turn: turn }
}

/// `home`, with the whole node.
fn whole_node() -> Cluster {
    let turn = Turn::Whole(NODE.write().unwrap_or_else(|e| e.into_inner()));
    Cluster { home: agents(), _turn: turn }
}

/// An agent that answers its question.
const ANSWER: &str = r#"["sh", "-c", "echo working on {question}; echo \"> the answer to {question}\""]"#;

/// Add `toml` to the home's agents file.
fn add_agents(h: &Home, toml: &str) {
    let path = h.path().join("agents.toml");
    let before = std::fs::read_to_string(&path).unwrap();
    std::fs::write(path, format!("{before}\n{toml}")).unwrap();
}

fn nproc() -> u32 {
    String::from_utf8(Command::new("nproc").output().unwrap().stdout).unwrap().trim().parse().unwrap()
}

/// A started task's token.
fn start(h: &Home, role: &str, question: &str) -> String {
    h.run(&["--json", "ask", role, question, "--async"], 0).json()["token"].as_str().unwrap().to_owned()
}

/// Its Slurm job, once Slurm runs it.
fn running_job(h: &Home, token: &str) -> u64 {
    wait_until(Duration::from_secs(30), "the job to run", || h.status(token)["slurm"]["state"] == "RUNNING");
    h.status(token)["slurm"]["job_id"].as_u64().unwrap()
}

fn agents() -> Home {
    cluster();
    let h = Home::new();
    std::fs::create_dir_all(h.path()).unwrap();
    let answer = ANSWER;
    let trap = |code: u8| {
        format!(
            r#"["sh", "-c", "trap 'echo got TERM >> {}; exit {code}' TERM; echo started; while :; do sleep 0.1; done"]"#,
            h.path().join("trapped").display()
        )
    };
    std::fs::write(
        h.path().join("agents.toml"),
        format!(
            "[agents.here]\ncommand = {answer}\n\n[agents.there]\ncommand = {answer}\nbackend = \"slurm\"\n\
             [agents.there.slurm]\ncpus = 1\n\n[agents.trap]\ncommand = {}\nbackend = \"slurm\"\ntimeout = \"5m\"\n\n\
             [agents.trap0]\ncommand = {}\nbackend = \"slurm\"\ntimeout = \"5m\"\n",
            trap(3),
            trap(0)
        ),
    )
    .unwrap();
    h
}

fn squeue(job: u64) -> String {
    let out = Command::new("squeue").args(["--noheader", "--jobs", &job.to_string(), "--format=%T"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn an_ask_on_the_cluster_answers_as_it_does_here_and_status_names_the_job_and_node() {
    let h = home();
    let here = h.run(&["--json", "ask", "here", "what is 6x7", "--sync"], 0).json();
    let there = h.run(&["--json", "ask", "there", "what is 6x7", "--sync"], 0).json();
    assert_eq!(there["status"], "completed", "{there}");
    assert_eq!(there["summary"], here["summary"], "{there}");
    let log = |v: &Value| std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert_eq!(log(&there), log(&here));

    let trap = h.run(&["--json", "ask", "trap", "x", "--async"], 0).json();
    let token = trap["token"].as_str().unwrap();
    wait_until(Duration::from_secs(30), "the job to run", || h.status(token)["slurm"]["state"] == "RUNNING");
    let st = h.status(token);
    let node = String::from_utf8(Command::new("hostname").arg("-s").output().unwrap().stdout).unwrap();
    assert_eq!(st["slurm"]["node"], node.trim(), "{st}");
    let job = st["slurm"]["job_id"].as_u64().unwrap();
    let text = h.run(&["status", token], 0).stdout;
    assert!(text.contains(&format!("slurm: job {job} running on {}", node.trim())), "{text}");
    h.run(&["halt", token, "--grace", "1s"], 0);
}

#[test]
fn what_the_agent_writes_to_stderr_keeps_its_place_in_the_log_and_summary() {
    let h = home();
    // Output and errors interleaved, an early warning before the answer, a late one after it.
    let mixed = r#"["sh", "-c", "i=1; while [ $i -le 40 ]; do echo out $i; echo err $i >&2; i=$((i+1)); done; echo 'warning: early' >&2; echo '> FINAL ANSWER {question}'; echo done; echo 'warning: late' >&2"]"#;
    add_agents(
        &h,
        &format!(
            "[agents.mixed_here]\ncommand = {mixed}\n\n[agents.mixed_there]\ncommand = {mixed}\nbackend = \"slurm\"\n"
        ),
    );
    let here = h.run(&["--json", "ask", "mixed_here", "x", "--sync"], 0).json();
    let there = h.run(&["--json", "ask", "mixed_there", "x", "--sync"], 0).json();
    assert_eq!(here["summary"], "FINAL ANSWER x\ndone\nwarning: late", "{here}");
    assert_eq!(there["summary"], here["summary"], "{there}");
    let log = |v: &Value| std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert_eq!(log(&there), log(&here));
}

#[test]
fn a_halt_runs_the_agents_trap_on_its_node_and_the_task_is_cancelled() {
    let h = home();
    let token = h.run(&["--json", "ask", "trap", "x", "--async"], 0).json()["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "the agent to start", || h.status(&token)["line_count"].as_u64() >= Some(1));
    let t0 = Instant::now();
    let v = h.run(&["--json", "halt", &token, "--grace", "5s"], 0).json();
    let took = t0.elapsed();
    assert_eq!(v["status"], "cancelled", "{v}");
    assert_eq!(v["exit_code"], 3, "the trap's exit: {v}");
    assert!(std::fs::read_to_string(h.path().join("trapped")).unwrap().contains("got TERM"));
    // A hang guard well above grace + 1 s.
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn a_killed_supervisors_job_is_cancelled_by_the_next_status() {
    let h = home();
    let token = h.run(&["--json", "ask", "trap", "x", "--async"], 0).json()["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "the job to run", || h.status(&token)["slurm"]["state"] == "RUNNING");
    let job = h.status(&token)["slurm"]["job_id"].as_u64().unwrap();
    let sup = h.record(&token)["started"]["supervisor_pid"].as_i64().unwrap();
    // srun dies with its supervisor, and a helper process it forked would then cancel the job
    // itself (woken by the SIGHUP and SIGCONT its orphaned group gets): frozen with the rest of
    // the task's cgroup, it leaves the job to the lost path. (Once the step runs: the agent has
    // written its first line.)
    wait_until(Duration::from_secs(30), "the agent to start", || h.status(&token)["line_count"].as_u64() >= Some(1));
    let st = h.status(&token);
    let cgroup = std::path::PathBuf::from(st["containment"]["cgroup"]["path"].as_str().expect("a cgroup (root)"));
    std::fs::write(cgroup.join("cgroup.freeze"), "1").unwrap();
    wait_until(Duration::from_secs(10), "the cgroup to freeze", || {
        std::fs::read_to_string(cgroup.join("cgroup.events")).unwrap().contains("frozen 1")
    });
    // SAFETY: kill on a supervisor of this test's own task.
    unsafe { libc::kill(sup as i32, libc::SIGKILL) };
    wait_until(Duration::from_secs(10), "the supervisor to die", || !alive(sup));
    let st = h.status(&token);
    assert_eq!(st["status"], "lost", "{st}");
    assert!(st["note"].as_str().unwrap().contains(&format!("its Slurm job {job} was cancelled")), "{st}");
    // Slurm lets its processes go (SIGTERM, SIGKILL after its KillWait), then forgets it.
    wait_until(Duration::from_secs(60), "the job to leave squeue", || squeue(job).is_empty());
}

#[test]
fn a_job_slurm_refuses_fails_the_task_with_slurms_words() {
    let h = home();
    let toml = std::fs::read_to_string(h.path().join("agents.toml")).unwrap();
    let bad =
        "[agents.nowhere]\ncommand = [\"true\"]\nbackend = \"slurm\"\n[agents.nowhere.slurm]\npartition = \"nope\"\n";
    std::fs::write(h.path().join("agents.toml"), format!("{toml}\n{bad}")).unwrap();
    let t0 = Instant::now();
    let v = h.run(&["--json", "ask", "nowhere", "x", "--sync"], 1).json();
    assert_eq!(v["status"], "failed", "{v}");
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("srun: error") && log.contains("partition"), "{log}");
    // Not held up looking for a job that was never made (a hang guard, not a figure).
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
}

#[test]
fn a_halt_of_a_job_slurm_holds_pending_cancels_it_at_once() {
    let h = whole_node();
    // More CPUs than the node has: Slurm holds it (it does not refuse a job it could run once
    // others end).
    let cpus: u32 = String::from_utf8(Command::new("nproc").output().unwrap().stdout).unwrap().trim().parse().unwrap();
    let toml = std::fs::read_to_string(h.path().join("agents.toml")).unwrap();
    let big = format!(
        "[agents.big]\ncommand = [\"sleep\", \"300\"]\nbackend = \"slurm\"\n[agents.big.slurm]\ncpus = {cpus}\n"
    );
    std::fs::write(h.path().join("agents.toml"), format!("{toml}\n{big}")).unwrap();
    let first = h.run(&["--json", "ask", "big", "one", "--async"], 0).json()["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "the first to run", || h.status(&first)["slurm"]["state"] == "RUNNING");
    let second = h.run(&["--json", "ask", "big", "two", "--async"], 0).json()["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "the second to wait", || h.status(&second)["slurm"]["state"] == "PENDING");
    let job = h.status(&second)["slurm"]["job_id"].as_u64().unwrap();
    let t0 = Instant::now();
    let v = h.run(&["--json", "halt", &second, "--grace", "30s"], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    // At once, not after the 30 s grace (a loose guard well under it).
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    wait_until(Duration::from_secs(30), "the job to leave squeue", || squeue(job).is_empty());
    h.run(&["halt", &first, "--grace", "1s"], 0);
}

#[test]
fn a_job_slurm_holds_pending_is_queued_with_its_reason_keeps_its_pools_place_and_runs_later() {
    let h = whole_node();
    // The pool sends its tasks to the cluster; their template says nothing of it.
    add_agents(
        &h,
        &format!(
            "[agents.hog]\ncommand = [\"sleep\", \"300\"]\nbackend = \"slurm\"\ntimeout = \"5m\"\n[agents.hog.slurm]\ncpus = {}\n\n\
             [agents.pooled]\ncommand = {ANSWER}\npool = \"cluster\"\n\n\
             [pools.cluster]\nparallel = 1\nbackend = \"slurm\"\n[pools.cluster.slurm]\ncpus = 1\n\n\
             [agents.late]\ncommand = [\"sh\", \"-c\", \"echo started; sleep 300\"]\nbackend = \"slurm\"\ntimeout = \"2s\"\n",
            nproc()
        ),
    );
    let hog = start(&h, "hog", "all of it");
    running_job(&h, &hog);

    let handed = h.run(&["--json", "ask", "pooled", "first", "--async"], 0).json();
    assert!(handed["message"].as_str().unwrap().contains("waits for Slurm to run its job"), "{handed}");
    let first = handed["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "Slurm to say why it waits", || {
        h.status(&first)["slurm_pending"] == "Resources"
    });
    let st = h.status(&first);
    assert_eq!((&st["status"], &st["slurm"]["state"]), (&"queued".into(), &"PENDING".into()), "{st}");
    let job = st["slurm"]["job_id"].as_u64().unwrap();
    let text = h.run(&["status", &first], 0).stdout;
    assert!(text.contains(&format!("Slurm holds job {job} pending (Resources)")), "{text}");
    // Pending on the cluster, it holds its place in the pool: the next one waits in line.
    let second = start(&h, "pooled", "second");
    let st = h.status(&second);
    assert_eq!(st["status"], "queued", "{st}");
    assert!(st.get("slurm").is_none() && st.get("slurm_pending").is_none(), "{st}");
    assert!(st["summary"].as_str().unwrap().contains("place 1 in line for pool `cluster`"), "{st}");
    let listed = h.run(&["--json", "list", "--status", "queued"], 0).stdout;
    assert!(listed.contains(&first) && listed.contains(&second), "{listed}");
    // A deadline counts from when Slurm runs the job, as Slurm's time limit does.
    let late = start(&h, "late", "x");
    wait_until(Duration::from_secs(60), "the late task to wait past its deadline", || {
        let st = h.status(&late);
        // (`starting` until its supervisor has asked Slurm for the job.)
        assert!(st["status"] == "queued" || st["status"] == "starting", "{st}");
        st["status"] == "queued" && st["elapsed_ms"].as_u64() > Some(3_000)
    });

    h.run(&["halt", &hog, "--grace", "1s"], 0);
    let v = h.run(&["--json", "await", &late], 1).json();
    assert_eq!(v["status"], "expired", "{v}");
    assert!(v["note"].as_str().unwrap().contains("deadline passed"), "{v}");
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.starts_with("started"), "it ran before it expired: {log}");
    for (token, question) in [(&first, "first"), (&second, "second")] {
        let v = h.run(&["--json", "await", token], 0).json();
        assert_eq!(v["status"], "completed", "{v}");
        assert!(v["summary"].as_str().unwrap().contains(&format!("the answer to {question}")), "{v}");
        assert!(h.record(token).get("slurm_pending").is_none(), "{v}");
    }
}

#[test]
fn a_job_past_its_slurm_time_limit_ends_the_task_expired_with_slurms_reason() {
    let h = home();
    let token = start(&h, "trap", "x");
    let job = running_job(&h, &token);
    // Its time is up now (Slurm looks at time limits every 30 s or so).
    let updated = Command::new("scontrol").args(["update", &format!("JobId={job}"), "TimeLimit=0"]).status().unwrap();
    assert!(updated.success());
    wait_until(Duration::from_secs(120), "Slurm to end the job", || h.status(&token)["status"] != "running");
    let st = h.status(&token);
    assert_eq!(st["status"], "expired", "{st}");
    assert_eq!(st["exit_code"], 3, "the agent's trap ran: {st}");
    let note = st["note"].as_str().unwrap();
    assert!(note.contains(&format!("Slurm ended job {job} at its time limit (TimeLimit)")), "{st}");
    let log = std::fs::read_to_string(st["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("DUE TO TIME LIMIT"), "Slurm's own line is in the log: {log}");
}

#[test]
fn a_scancel_from_outside_ends_the_task_cancelled_saying_so() {
    let h = home();
    // Even when its agent exits 0 on the SIGTERM, while Slurm shows the job COMPLETING (its
    // epilog runs).
    let token = start(&h, "trap0", "x");
    let job = running_job(&h, &token);
    // Its trap is set once it said `started` (a job Slurm runs may not have run that far yet).
    wait_until(Duration::from_secs(30), "the agent to start", || h.status(&token)["line_count"].as_u64() >= Some(1));
    assert!(Command::new("scancel").arg(job.to_string()).status().unwrap().success());
    let v = h.run(&["--json", "await", &token], 1).json();
    assert_eq!((&v["status"], &v["exit_code"]), (&"cancelled".into(), &0.into()), "{v}");
    let note = v["note"].as_str().unwrap();
    assert!(note.contains(&format!("its Slurm job {job} was cancelled outside agentctl")), "{v}");
}

#[test]
fn a_launcher_inside_a_slurm_job_gives_its_task_a_job_of_its_own() {
    let h = home();
    // An agent on a node (or a batch script) launches: its environment names its own job.
    let outer = start(&h, "trap", "outer");
    let outer_job = running_job(&h, &outer);
    let id = outer_job.to_string();
    let out = h
        .cmd()
        .args(["--json", "ask", "there", "inner", "--sync"])
        .envs([("SLURM_JOB_ID", id.as_str()), ("SLURM_JOBID", id.as_str()), ("SLURM_STEP_ID", "0")])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "completed", "{v}");
    let inner_job = h.status(v["token"].as_str().unwrap())["slurm"]["job_id"].as_u64();
    assert!(inner_job.is_some_and(|j| j != outer_job), "{inner_job:?} beside {outer_job}");
    h.run(&["halt", &outer, "--grace", "1s"], 0);
}

#[test]
fn a_rate_limited_run_on_the_cluster_runs_again_as_a_job_of_its_own() {
    let h = home();
    // Rate-limited (exit 75) the first time, a few seconds in; then answers.
    let count = h.path().join("runs");
    add_agents(
        &h,
        &format!(
            "[agents.limited]\ncommand = [\"sh\", \"-c\", \"echo x >> {}; [ $(wc -l < {}) -ge 2 ] || {{ sleep 3; exit 75; }}; \
             echo '> done'\"]\nbackend = \"slurm\"\nretry_on = {{ exit = [75] }}\nbackoff = \"100ms\"\n",
            count.display(),
            count.display()
        ),
    );
    let runs = || std::fs::read_to_string(&count).unwrap_or_default().lines().count();
    let token = start(&h, "limited", "x");
    let mut first = None;
    wait_until(Duration::from_secs(30), "the first run's job", || {
        let job = h.record(&token)["slurm_job"].as_u64();
        first = job.filter(|_| runs() == 1);
        first.is_some()
    });
    let v = h.run(&["--json", "await", &token], 0).json();
    assert_eq!((&v["status"], &v["attempts"]), (&"completed".into(), &2.into()), "{v}");
    // The second run's own job, found as such (the first one's has the same name).
    let second = h.record(&token)["slurm_job"].as_u64().unwrap();
    assert!(second > first.unwrap(), "{first:?} then {second}");
    let lock = std::fs::read_to_string(h.path().join("tasks").join(&token).join("lock")).unwrap();
    assert!(lock.lines().filter(|l| l.starts_with("slurm-job")).eq([format!("slurm-job {second}").as_str()]), "{lock}");
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("done"), "{log}");
}

#[test]
fn a_pending_task_stays_queued_while_slurm_cannot_be_asked() {
    let h = whole_node();
    // Slurm's commands beside the srun the template's PATH names; its squeue fails while
    // `down` exists.
    let bin = h.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let which = |c: &str| String::from_utf8(Command::new("which").arg(c).output().unwrap().stdout).unwrap();
    for c in ["srun", "scancel"] {
        std::os::unix::fs::symlink(which(c).trim(), bin.join(c)).unwrap();
    }
    let down = h.path().join("down");
    let squeue = format!(
        "#!/bin/sh\nif [ -e {} ]; then echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1; fi\nexec {} \"$@\"\n",
        down.display(),
        which("squeue").trim()
    );
    std::fs::write(bin.join("squeue"), squeue).unwrap();
    std::fs::set_permissions(bin.join("squeue"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    add_agents(
        &h,
        &format!(
            "[agents.hog]\ncommand = [\"sleep\", \"300\"]\nbackend = \"slurm\"\ntimeout = \"5m\"\n[agents.hog.slurm]\ncpus = {}\n\n\
             [agents.far]\ncommand = {ANSWER}\nbackend = \"slurm\"\nenv = {{ PATH = \"{path}\" }}\n",
            nproc()
        ),
    );
    let hog = start(&h, "hog", "all of it");
    running_job(&h, &hog);
    let task = start(&h, "far", "x");
    // Its supervisor's own look, as stored (`status` would ask Slurm itself, and may see the
    // reason first).
    wait_until(Duration::from_secs(30), "its supervisor to learn why it waits", || {
        h.record(&task)["slurm_pending"] == "Resources"
    });
    std::fs::write(&down, "").unwrap();
    // Its supervisor looks after 1, 2 and 4 s: each time without an answer.
    wait_until(Duration::from_secs(60), "looks at Slurm to fail", || {
        let st = h.status(&task);
        assert_eq!(st["status"], "queued", "no answer is no news: {st}");
        assert_eq!(st["slurm_pending"], "Resources", "{st}");
        st["elapsed_ms"].as_u64() > Some(8_000)
    });
    std::fs::remove_file(&down).unwrap();
    h.run(&["halt", &hog, "--grace", "1s"], 0);
    let v = h.run(&["--json", "await", &task], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
}
