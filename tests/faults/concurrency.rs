//! Sixteen processes halting, awaiting and asking about one task on one CPU (issue 5, fault 7);
//! crashes while records are written never leave a torn record, and strays are cleaned up (9).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::{BIN, Home, fake_agent, read_pids, wait_until};

/// `agentctl --home H --json ARGS…` pinned to CPU 0.
fn on_one_cpu(h: &Home, args: &[&str]) -> Child {
    Command::new("taskset")
        .args(["-c", "0", BIN, "--home"])
        .arg(h.path())
        .arg("--json")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the `taskset` command (util-linux) is needed for this test")
}

#[test]
fn sixteen_processes_on_one_cpu_get_coherent_answers_and_one_final_record() {
    let h = Home::new();
    let pidfile = h.path().join("pid");
    let token = h.start(&["stubborn", pidfile.to_str().unwrap()]);
    read_pids(&pidfile);
    let mut callers = Vec::new();
    for i in 0..16 {
        let args: Vec<&str> = match i % 3 {
            0 => vec!["halt", &token, "--grace", "1s"],
            1 => vec!["await", &token, "--timeout", "30s"],
            _ => vec!["status", &token],
        };
        callers.push((args[0].to_owned(), on_one_cpu(&h, &args)));
    }
    let mut halted = 0;
    for (verb, child) in callers {
        let out = child.wait_with_output().unwrap();
        let code = out.status.code().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{verb} printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
        match verb.as_str() {
            "halt" => {
                assert_eq!((code, v["status"].as_str()), (0, Some("cancelled")), "{v}");
                if !v["note"].as_str().unwrap_or("").contains("nothing was stopped") {
                    halted += 1;
                }
            }
            "await" => assert_eq!((code, v["status"].as_str()), (1, Some("cancelled")), "{v}"),
            _ => assert!(
                (code == 0 && v["status"] == "running") || (code == 1 && v["status"] == "cancelled"),
                "status said {code} {v}"
            ),
        }
    }
    assert!(halted >= 1);
    let events = h.run(&["--json", "events"], 0).json();
    let finished: Vec<_> =
        events["events"].as_array().unwrap().iter().filter(|e| e["token"] == token.as_str()).collect();
    assert_eq!(finished.len(), 1, "one final record means one task_finished event: {finished:?}");
    assert_eq!(h.record(&token)["ended"]["outcome"]["status"], "cancelled");
}

#[test]
fn supervisors_killed_mid_write_never_leave_a_torn_record() {
    let h = Home::new();
    let fake = fake_agent();
    let mut tokens = Vec::new();
    for _ in 0..30 {
        let v = h.run(&["--json", "run", "--async", "--", &fake, "sleep", "0.05"], 0).json();
        let token = v["token"].as_str().unwrap().to_owned();
        // Kill the supervisor as the agent writes its last line: while it finishes up (reading,
        // summarising, writing and renaming records) or just before.
        // (On a loaded machine the launcher may hand it back queued behind tasks whose killed
        // supervisors are not yet known to be dead, or starting: it starts soon after.)
        wait_until(Duration::from_secs(60), "the agent to start", || h.record(&token)["started"].is_object());
        let sup = h.record(&token)["started"]["supervisor_pid"].as_i64().unwrap();
        let log = h.path().join("subagents/run/data/history").join(format!("{token}.log"));
        wait_until(Duration::from_secs(10), "the agent's last line", || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.contains("> slept"))
        });
        let _ = kill(Pid::from_raw(sup as i32), Signal::SIGKILL);
        tokens.push(token);
    }
    let check: String = h.db().query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    for t in &tokens {
        // A record, and for an ended task its one event, both or neither (one transaction).
        let rec = h.record(t);
        let events: i64 = h.db().query_row("SELECT count(*) FROM events WHERE token = ?1", [t], |r| r.get(0)).unwrap();
        assert_eq!(events, i64::from(!rec["ended"].is_null()), "{t}: {rec}");
        let status = h.status(t)["status"].as_str().unwrap().to_owned();
        assert!(status == "completed" || status == "lost", "{t} is {status}");
    }
    let listed = h.run(&["--json", "list"], 0).json();
    assert_eq!(listed["count"], 30);
}

#[test]
fn stray_temp_files_of_a_crashed_write_are_never_read_and_are_cleaned_up() {
    let h = Home::new();
    let token = h.start(&["sleep", "1", "clean"]);
    let task_dir = h.path().join("tasks").join(&token);
    let history = h.path().join("subagents/run/data/history");
    let strays = [task_dir.join(".tmp-lines"), history.join(format!(".tmp-{token}.summary.md"))];
    for s in &strays {
        std::fs::write(s, "{\"token\": \"torn").unwrap();
    }
    assert_eq!(h.status(&token)["status"], "running");
    let v = h.run(&["--json", "await", &token, "--timeout", "30s"], 0).json();
    assert_eq!(v["summary"], "clean");
    wait_until(Duration::from_secs(5), "the strays to be removed", || strays.iter().all(|s| !s.exists()));
}

#[test]
fn readers_never_see_a_torn_record_while_records_are_written() {
    let h = Home::new();
    // The store exists before the reader opens it.
    h.init();
    let fake = fake_agent();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (reads, torn) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let (mut reads, mut torn) = (0u64, Vec::new());
            let db = h.db();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(mut stmt) = db.prepare("SELECT record FROM tasks") else { continue };
                let texts: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().flatten().collect();
                for text in texts {
                    reads += 1;
                    if serde_json::from_str::<serde_json::Value>(&text).is_err() {
                        torn.push(text);
                    }
                }
            }
            (reads, torn)
        });
        for _ in 0..20 {
            h.run(&["--json", "run", "--async", "--", &fake, "sleep", "0.05"], 0);
        }
        wait_until(Duration::from_secs(30), "all tasks to end", || h.all_ended());
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap()
    });
    assert!(reads > 100, "the reader only managed {reads} reads");
    assert!(torn.is_empty(), "{} torn reads, e.g. {:?}", torn.len(), torn.first());
}
