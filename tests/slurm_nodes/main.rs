//! Agents on a three-node Slurm cluster whose nodes are other hosts than the launcher's:
//! `scripts/slurm-cluster up DIR --nodes 3` (each slurmd in a network and UTS namespace of its
//! own, hostname nodeK), these tests run where the cluster is reachable, in the controller's
//! namespace, as on a login node (`scripts/slurm-cluster exec DIR cargo test --test slurm_nodes`;
//! scripts/test does both as root). The homes are on this machine's file system, which every
//! node shares, as a cluster's shared file system would be.

#[allow(dead_code)]
#[path = "../cli/common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use common::{Home, alive, wait_until};
use serde_json::Value;

/// The cluster: the tests that take a node away (or all of one) run alone.
static NODES: RwLock<()> = RwLock::new(());

#[allow(dead_code, reason = "held for the test's length")]
enum Turn {
    Shared(RwLockReadGuard<'static, ()>),
    Whole(RwLockWriteGuard<'static, ()>),
}

/// A test's home, its turn on the cluster, and its open tasks halted (and their jobs cancelled)
/// when it ends, whatever became of the test.
struct Cluster {
    home: Home,
    _turn: Turn,
}

impl std::ops::Deref for Cluster {
    type Target = Home;
    fn deref(&self) -> &Home {
        &self.home
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Every task not ended, queued ones first (a running one's end would let them start).
        let Ok(out) = self.home.cmd().args(["--json", "list", "--limit", "200"]).output() else { return };
        let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else { return };
        let mut open: Vec<&Value> =
            v["tasks"].as_array().into_iter().flatten().filter(|t| t["ended_at"].is_null()).collect();
        open.sort_by_key(|t| t["status"] != "queued");
        for t in open {
            let _ = self.home.cmd().args(["halt", t["token"].as_str().unwrap_or_default(), "--grace", "1s"]).output();
        }
    }
}

/// Runs `f` when dropped: what a test must undo, whether or not it passed.
struct Undo<F: FnMut()>(F);

impl<F: FnMut()> Drop for Undo<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// The cluster's directory (SLURM_CONF's), failing (never skipping) without one.
fn cluster_dir() -> PathBuf {
    let conf = std::env::var("SLURM_CONF").unwrap_or_default();
    let nodes = Command::new("sinfo").args(["--noheader", "--format=%n"]).output();
    let names = nodes.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    assert!(
        !conf.is_empty() && names.contains("node3"),
        "these tests need the three-node cluster (`scripts/slurm-cluster up DIR --nodes 3`, as root) and to run \
         where it is reachable (`scripts/slurm-cluster exec DIR cargo test --test slurm_nodes`); scripts/test does both"
    );
    Path::new(&conf).parent().unwrap().to_owned()
}

/// An agent that answers, and says where it ran in a file of the (shared) home.
const ANSWER: &str = r#"["sh", "-c", "hostname > {home}/host-$AGENTCTL_TOKEN; echo working on {question}; echo \"> the answer to {question}\""]"#;

/// One that traps SIGTERM (saying where), its pid and its child's in a file, until halted.
const TRAP: &str = r#"["sh", "-c", "trap 'echo got TERM on $(hostname) >> {home}/trapped; exit 3' TERM; sleep 300 & echo $$ $! > {home}/pids-$AGENTCTL_TOKEN; echo started; wait"]"#;

/// A home whose roles run `ANSWER` here, anywhere on the cluster and pinned to each node,
/// and `TRAP` on each node.
fn home(turn: Turn) -> Cluster {
    cluster_dir();
    let h = Home::new();
    std::fs::create_dir_all(h.path()).unwrap();
    let at = h.path().display().to_string();
    let (answer, trap) = (ANSWER.replace("{home}", &at), TRAP.replace("{home}", &at));
    // Held (its CPU taken) until the test says go.
    let held = answer.replace("; echo working", "; while [ ! -e {home}/go ]; do sleep 0.1; done; echo working");
    let held = held.replace("{home}", &at);
    let mut toml = format!(
        "[pools.spread]\nparallel = 50\n\n[agents.here]\ncommand = {answer}\n\n\
         [agents.anywhere]\ncommand = {held}\nbackend = \"slurm\"\npool = \"spread\"\n[agents.anywhere.slurm]\ncpus = 1\n"
    );
    for k in 1..=3 {
        toml.push_str(&format!(
            "\n[agents.node{k}]\ncommand = {answer}\nbackend = \"slurm\"\n[agents.node{k}.slurm]\nargs = [\"-w\", \"node{k}\"]\n\
             \n[agents.trap{k}]\ncommand = {trap}\nbackend = \"slurm\"\ntimeout = \"5m\"\n[agents.trap{k}.slurm]\nargs = [\"-w\", \"node{k}\"]\n"
        ));
    }
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    Cluster { home: h, _turn: turn }
}

fn shared() -> Cluster {
    home(Turn::Shared(NODES.read().unwrap_or_else(|e| e.into_inner())))
}

fn whole() -> Cluster {
    home(Turn::Whole(NODES.write().unwrap_or_else(|e| e.into_inner())))
}

/// Add `toml` to the home's agents file.
fn add_agents(h: &Home, toml: &str) {
    let path = h.path().join("agents.toml");
    let before = std::fs::read_to_string(&path).unwrap();
    std::fs::write(path, format!("{before}{toml}")).unwrap();
}

/// A started task's token.
fn start(h: &Home, role: &str, question: &str) -> String {
    h.run(&["--json", "ask", role, question, "--async"], 0).json()["token"].as_str().unwrap().to_owned()
}

/// Where task `token`'s agent ran, as it wrote it.
fn ran_on(h: &Home, token: &str) -> String {
    std::fs::read_to_string(h.path().join(format!("host-{token}"))).unwrap_or_default().trim().to_owned()
}

/// The agent's and its child's pids, once it wrote them.
fn agent_pids(h: &Home, token: &str) -> Vec<i64> {
    common::read_pids(&h.path().join(format!("pids-{token}")))
}

/// Its Slurm job, once its supervisor knows it runs (a moment after the agent starts: it asks
/// Slurm when the agent's first output comes).
fn running_job(h: &Home, token: &str) -> u64 {
    wait_until(Duration::from_secs(30), "the job to run", || h.status(token)["slurm"]["state"] == "RUNNING");
    h.status(token)["slurm"]["job_id"].as_u64().unwrap()
}

fn squeue(job: u64) -> String {
    let out = Command::new("squeue").args(["--noheader", "--jobs", &job.to_string(), "--format=%T"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The CPUs of all the cluster's nodes together, as Slurm counts them.
fn cluster_cpus() -> usize {
    let out = Command::new("sinfo").args(["--noheader", "--Node", "--format=%c"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse::<usize>().ok()).sum()
}

/// Node `node`'s state, as sinfo says it (`idle`, `alloc`, `down*`…).
fn node_state(node: &str) -> String {
    let out = Command::new("sinfo").args(["--noheader", "--node", node, "--format=%t"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn log(v: &Value) -> String {
    std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap()
}

#[test]
fn an_agent_on_node2_answers_as_a_local_run_does_and_status_names_its_node() {
    let h = shared();
    let here = h.run(&["--json", "ask", "here", "the question", "--sync"], 0).json();
    let there = h.run(&["--json", "ask", "node2", "the question", "--sync"], 0).json();
    assert_eq!(there["status"], "completed", "{there}");
    let token = there["token"].as_str().unwrap();
    assert_eq!(ran_on(&h, token), "node2");
    assert_eq!(there["summary"], here["summary"], "{there}");
    assert_eq!(there["summary"], "the answer to the question", "{there}");
    assert_eq!(log(&there), log(&here));
    let st = h.status(token);
    assert_eq!(st["slurm"]["node"], "node2", "{st}");
    let text = h.run(&["status", token], 0).stdout;
    assert!(text.contains(&format!("slurm: job {} ", st["slurm"]["job_id"])) && text.contains("on node2"), "{text}");
}

#[test]
fn fifty_tasks_of_a_pool_spread_over_the_three_nodes_and_each_answers() {
    let h = whole();
    let tokens: Vec<String> = (0..50).map(|i| start(&h, "anywhere", &format!("question {i}"))).collect();
    // Every CPU of the cluster taken, by agents that hold theirs until told to go (and told,
    // whatever becomes of the test): Slurm had to use every node.
    let go = h.path().join("go");
    let _go = Undo(|| {
        let _ = std::fs::write(&go, "");
    });
    wait_until(Duration::from_secs(60), "every CPU to be taken", || {
        tokens.iter().filter(|t| !ran_on(&h, t).is_empty()).count() >= cluster_cpus().min(50)
    });
    std::fs::write(h.path().join("go"), "").unwrap();
    for token in &tokens {
        h.run(&["--json", "await", token, "--timeout", "4m"], 0);
    }
    let mut nodes = std::collections::BTreeMap::<String, usize>::new();
    for (i, token) in tokens.iter().enumerate() {
        let st = h.status(token);
        assert_eq!(st["status"], "completed", "{st}");
        assert_eq!(st["summary"], format!("the answer to question {i}"), "{st}");
        *nodes.entry(ran_on(&h, token)).or_default() += 1;
    }
    assert_eq!(nodes.keys().collect::<Vec<_>>(), ["node1", "node2", "node3"], "{nodes:?}");
}

#[test]
fn a_halt_of_an_agent_on_node3_runs_its_trap_there_and_leaves_nothing() {
    let h = shared();
    let token = start(&h, "trap3", "x");
    let pids = agent_pids(&h, &token);
    // Its agent runs: `status` says so at once, asking Slurm itself if its supervisor has not yet.
    let st = h.status(&token);
    assert_eq!((st["status"].as_str(), st["slurm"]["node"].as_str()), (Some("running"), Some("node3")), "{st}");
    let job = st["slurm"]["job_id"].as_u64().unwrap();
    let v = h.run(&["--json", "halt", &token, "--grace", "10s"], 0).json();
    assert_eq!((v["status"].as_str(), v["exit_code"].as_i64()), (Some("cancelled"), Some(3)), "{v}");
    assert_eq!(std::fs::read_to_string(h.path().join("trapped")).unwrap(), "got TERM on node3\n");
    wait_until(Duration::from_secs(60), "the job to leave squeue", || squeue(job).is_empty());
    wait_until(Duration::from_secs(30), "its processes to go", || !pids.iter().any(|&p| alive(p)));
}

#[test]
fn a_node_whose_slurmd_dies_fails_its_task_with_slurms_words() {
    let h = whole();
    let dir = cluster_dir();
    let token = start(&h, "trap2", "x");
    let pids = agent_pids(&h, &token);
    let slurmd: i32 = std::fs::read_to_string(dir.join("slurmd-node2.pid")).unwrap().trim().parse().unwrap();
    // The node comes back, whatever becomes of the test.
    // (Without a panic: it may run while the test's own unwinds.)
    let back = Undo(|| {
        let script = env!("CARGO_MANIFEST_DIR").to_owned() + "/scripts/slurm-cluster";
        let _ = Command::new(script).args(["start-node", &dir.to_string_lossy(), "2"]).status();
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        while node_state("node2") != "idle" && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    // SAFETY: kill of the test cluster's own slurmd.
    unsafe { libc::kill(slurmd, libc::SIGKILL) };
    let killed = std::time::Instant::now();
    // Slurm declares the node down after its SlurmdTimeout (10 s) and ends the job.
    wait_until(Duration::from_secs(90), "the task to end", || h.status(&token)["ended_at"].is_string());
    let st = h.status(&token);
    eprintln!("ended {:?} after its node's slurmd was killed: {} ({})", killed.elapsed(), st["status"], st["error"]);
    assert!(["failed", "lost"].contains(&st["status"].as_str().unwrap()), "{st}");
    let said = format!("{} {}", st["error"], st["note"]);
    assert!(said.contains("node2") && (said.contains("NodeDown") || said.contains("NODE_FAIL")), "{st}");
    // The node comes back, and what ran on it goes.
    drop(back);
    assert_eq!(node_state("node2"), "idle");
    wait_until(Duration::from_secs(60), "the dead node's processes to go", || !pids.iter().any(|&p| alive(p)));
}

#[test]
fn a_killed_supervisor_is_found_lost_and_its_job_on_node1_cancelled() {
    let h = shared();
    let token = start(&h, "trap1", "x");
    let pids = agent_pids(&h, &token);
    let job = running_job(&h, &token);
    let st = h.status(&token);
    // srun dies with its supervisor, and a helper it forked would cancel the job itself: frozen
    // with the rest of the task's cgroup, it leaves the job to the lost path.
    let cgroup = PathBuf::from(st["containment"]["cgroup"]["path"].as_str().expect("a cgroup (root)"));
    std::fs::write(cgroup.join("cgroup.freeze"), "1").unwrap();
    wait_until(Duration::from_secs(10), "the cgroup to freeze", || {
        std::fs::read_to_string(cgroup.join("cgroup.events")).unwrap().contains("frozen 1")
    });
    h.kill_supervisor(&token);
    let st = h.status(&token);
    assert_eq!(st["status"], "lost", "{st}");
    assert!(st["note"].as_str().unwrap().contains(&format!("its Slurm job {job} was cancelled")), "{st}");
    wait_until(Duration::from_secs(60), "the job to leave squeue", || squeue(job).is_empty());
    wait_until(Duration::from_secs(30), "its processes on node1 to go", || !pids.iter().any(|&p| alive(p)));
}

#[test]
fn a_job_pending_for_a_busy_node_waits_queued_then_runs() {
    let h = whole();
    // node1 taken whole by one job; a second job for node1 must wait for it.
    add_agents(
        &h,
        "\n[agents.busy1]\ncommand = [\"sleep\", \"300\"]\nbackend = \"slurm\"\n[agents.busy1.slurm]\nargs = [\"-w\", \"node1\", \"--exclusive\"]\n",
    );
    let first = start(&h, "busy1", "x");
    running_job(&h, &first);
    let second = start(&h, "node1", "after");
    wait_until(Duration::from_secs(30), "the second to be held", || {
        h.status(&second)["slurm_pending"].to_string().contains("Resources")
    });
    assert_eq!(h.status(&second)["status"], "queued");
    h.run(&["halt", &first, "--grace", "1s"], 0);
    let v = h.run(&["--json", "await", &second, "--timeout", "2m"], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(ran_on(&h, &second), "node1");
}

#[test]
fn a_question_from_an_agent_on_node3_is_answered_by_the_lead() {
    let h = shared();
    add_agents(
        &h,
        "\n[agents.asker3]\ncommand = [\"sh\", \"-c\", \"echo on $(hostname); a=$(agentctl ask-lead 'which branch?' --timeout 120s) && echo \\\"chose $a\\\"\"]\nbackend = \"slurm\"\n[agents.asker3.slurm]\nargs = [\"-w\", \"node3\"]\n",
    );
    let token = start(&h, "asker3", "x");
    wait_until(Duration::from_secs(60), "the question", || {
        h.status(&token)["pending_question"]["text"] == "which branch?"
    });
    h.run(&["reply", &token, "dev"], 0);
    let v = h.run(&["--json", "await", &token, "--timeout", "2m"], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    let out = log(&v);
    assert!(out.contains("on node3") && out.contains("chose dev"), "{out}");
}
