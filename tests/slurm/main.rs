//! Tasks whose agent runs on a Slurm cluster (`backend = "slurm"`): against the one-node
//! cluster `scripts/test` starts as root (`scripts/slurm-cluster`), named by `SLURM_CONF`.

#[allow(dead_code)]
#[path = "../cli/common.rs"]
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Home, alive, wait_until};
use serde_json::Value;

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
/// SIGTERM-trapping agent on the cluster (`trap`).
fn home() -> Home {
    cluster();
    let h = Home::new();
    std::fs::create_dir_all(h.path()).unwrap();
    let answer = r#"["sh", "-c", "echo working on {question}; echo \"> the answer to {question}\""]"#;
    let trap = format!(
        r#"["sh", "-c", "trap 'echo got TERM >> {}; exit 3' TERM; echo started; while :; do sleep 0.1; done"]"#,
        h.path().join("trapped").display()
    );
    std::fs::write(
        h.path().join("agents.toml"),
        format!(
            "[agents.here]\ncommand = {answer}\n\n[agents.there]\ncommand = {answer}\nbackend = \"slurm\"\n\
             [agents.there.slurm]\ncpus = 1\n\n[agents.trap]\ncommand = {trap}\nbackend = \"slurm\"\n"
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
    let h = home();
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
