//! `on_end` hooks: run once for every end of a task, whatever the outcome (the lost path's
//! too), with the task in their environment and its result on stdin; bounded, and noted in the
//! task when they fail, never changing its outcome.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Home, fixtures, wait_until};

/// A home whose every task's end appends `TOKEN STATUS ROLE EXIT TOKEN-FROM-STDIN` to `ends`.
fn hooked() -> Home {
    let h = Home::new();
    let ends = h.path().join("ends");
    let script = format!(
        "read -r json; t=$(printf '%s' \"$json\" | sed 's/.*\\\"token\\\":\\\"\\([0-9a-f]*\\)\\\".*/\\1/'); \
         echo \"$AGENTCTL_TOKEN $AGENTCTL_STATUS $AGENTCTL_ROLE $AGENTCTL_EXIT_CODE $t\" >> '{}'",
        ends.display()
    );
    let toml = format!(
        "[hooks]\non_end = [\"sh\", \"-c\", {script:?}]\n[agents.looper]\ncommand = [{claude:?}, \"loop\"]\n",
        claude = fixtures().join("stream/claude")
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    h
}

fn lines(h: &Home) -> Vec<String> {
    std::fs::read_to_string(h.path().join("ends")).unwrap_or_default().lines().map(String::from).collect()
}

/// Wait until every task's hook is done.
fn hooks_done(h: &Home) {
    wait_until(Duration::from_secs(60), "every hook to be done", || {
        let db = h.db();
        let left: i64 = db
            .query_row("SELECT count(*) FROM tasks WHERE json_extract(record, '$.hook') IS NOT 'done'", [], |r| {
                r.get(0)
            })
            .unwrap();
        left == 0
    });
}

#[test]
fn every_end_runs_the_hook_once_with_the_task_in_its_environment_and_stdin() {
    let h = hooked();
    let mut want: Vec<(String, &str)> = Vec::new();
    let start = |args: &[&str]| -> String {
        h.run(&[&["--json", "run", "--async"], args].concat(), 0).json()["token"].as_str().unwrap().to_owned()
    };
    for i in 0..45 {
        let t = start(&["--", "sh", "-c", &format!("exit {}", i % 2 * 3)]);
        want.push((t, if i % 2 == 0 { "completed" } else { "failed" }));
    }
    let halted = start(&["--", "sleep", "30"]);
    h.run(&["halt", &halted], 0);
    want.push((halted, "cancelled"));
    let expired = start(&["--timeout", "0.2s", "--", "sleep", "30"]);
    want.push((expired, "expired"));
    let over = h.run(&["--json", "ask", "looper", "--budget-turns", "3", "--async", "go"], 0).json();
    want.push((over["token"].as_str().unwrap().to_owned(), "over_budget"));
    // A supervisor killed: the lost path records the end, and runs the hook.
    let lost = start(&["--", "sleep", "30"]);
    h.kill_supervisor(&lost);
    assert_eq!(h.status(&lost)["status"], "lost");
    want.push((lost, "lost"));
    wait_until(Duration::from_secs(60), "every task to end", || h.all_ended());
    hooks_done(&h);
    let got = lines(&h);
    assert_eq!(got.len(), want.len(), "one line per end:\n{}", got.join("\n"));
    for (token, status) in &want {
        let line = got.iter().find(|l| l.starts_with(token.as_str())).unwrap_or_else(|| panic!("no hook for {token}"));
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!((f[1], f.last().copied()), (*status, Some(token.as_str())), "{line}");
        let v: Value = h.status(token);
        assert_eq!(v["status"], *status, "the hook never changes the outcome: {v}");
    }
    assert!(got.iter().any(|l| l.ends_with(" failed run 3 ") || l.contains(" failed run 3 ")), "{got:?}");
}

#[test]
fn a_hook_past_its_limit_is_killed_and_a_missing_one_is_noted_in_the_task() {
    let h = Home::new();
    std::fs::write(h.path().join("agents.toml"), "[hooks]\ntimeout = \"0.5s\"\non_end = [\"sleep\", \"300\"]\n")
        .unwrap();
    // An answer longer than a pipe holds, which the hook never reads: its limit holds all the same.
    let v =
        h.run(&["--json", "run", "--sync", "--", "sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a; echo"], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    hooks_done(&h);
    let s = h.status(&token);
    assert_eq!(s["status"], "completed", "{s}");
    assert!(s["note"].as_str().unwrap().contains("its on_end hook ran past its limit of 0.5s and was killed"), "{s}");
    std::fs::write(h.path().join("agents.toml"), "[hooks]\non_end = [\"/no/such/hook\"]\n").unwrap();
    let v = h.run(&["--json", "run", "--sync", "--", "false"], 1).json();
    let token = v["token"].as_str().unwrap().to_owned();
    hooks_done(&h);
    let s = h.status(&token);
    assert_eq!(s["status"], "failed", "{s}");
    assert!(s["note"].as_str().unwrap().contains("its on_end hook `/no/such/hook` could not start"), "{s}");
    // A bad [hooks] is refused when the file is read.
    std::fs::write(h.path().join("agents.toml"), "[hooks]\non_end = []\n").unwrap();
    let r = h.run(&["run", "--", "true"], 2);
    assert!(r.stderr.contains("[hooks] on_end is empty"), "{}", r.stderr);
}

#[test]
fn a_hook_its_supervisor_died_before_starting_is_started_by_the_next_look_once() {
    let h = hooked();
    let v = h.run(&["--json", "run", "--sync", "--", "true"], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    hooks_done(&h);
    assert_eq!(lines(&h).len(), 1);
    // As a supervisor killed between recording the end and starting the hook leaves it: due.
    h.db()
        .execute("UPDATE tasks SET record = json_set(record, '$.hook', 'due') WHERE token = ?1", [token.as_str()])
        .unwrap();
    for _ in 0..3 {
        h.status(&token);
    }
    hooks_done(&h);
    assert_eq!(lines(&h).len(), 2, "run once more, by the first look: {:?}", lines(&h));
}

#[test]
fn a_follow_up_at_once_after_an_end_leaves_each_turns_hook_to_run() {
    let h = hooked();
    let claude = fixtures().join("stream/claude");
    let toml = std::fs::read_to_string(h.path().join("agents.toml")).unwrap()
        + &format!("[agents.chat]\ncommand = [{claude:?}, \"echo\", \"{{question}}\"]\n");
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    let first = h.run(&["--json", "ask", "chat", "one", "--sync"], 0).json();
    let token = first["token"].as_str().unwrap().to_owned();
    h.run(&["--json", "ask", "--to", &token, "two", "--sync"], 0);
    hooks_done(&h);
    let got = lines(&h);
    assert_eq!(got.iter().filter(|l| l.starts_with(&token)).count(), 2, "one hook per turn: {got:?}");
}
