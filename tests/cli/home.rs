//! The home on disk: permissions, long paths, damaged records, deadlines.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{Home, fake_agent, wait_until};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        }
        out.push(p);
    }
}

#[test]
fn the_home_is_private_dirs_0700_files_0600() {
    let h = Home::under("state/agentctl");
    let v = h.run(&["--json", "ask", "reviewer", "perms"], 0).json();
    assert_eq!(v["status"], "completed");
    assert_eq!(mode(h.path()), 0o700);
    let mut all = Vec::new();
    walk(h.path(), &mut all);
    assert!(all.len() >= 8, "{all:?}");
    for p in all {
        let m = mode(&p);
        if p.is_dir() {
            assert_eq!(m, 0o700, "{} is {m:o}", p.display());
        } else {
            assert_eq!(m, 0o600, "{} is {m:o}", p.display());
        }
    }
}

#[test]
fn a_running_tasks_control_socket_is_private_too() {
    let h = Home::new();
    let token = h.start(&["sleep", "30"]);
    // Bound before the start was reported, so it is there now.
    assert_eq!(mode(&h.path().join("tasks").join(&token).join("ctl.sock")), 0o600);
    h.run(&["halt", &token], 0);
}

#[test]
fn a_long_home_path_still_gets_a_working_control_socket() {
    let h = Home::under(&format!("{}/{}", "x".repeat(90), "y".repeat(60)));
    assert!(h.path().join("tasks/abcdef/ctl.sock").as_os_str().len() > 108);
    let token = h.start(&["sleep", "30"]);
    let w = h.run(&["--json", "await", &token, "--timeout", "0.2s"], 124).json();
    assert_eq!(w["status"], "running");
    let halted = h.run(&["--json", "halt", &token], 0).json();
    assert_eq!(halted["status"], "cancelled");
}

#[test]
fn a_damaged_record_does_not_hide_the_other_tasks() {
    let h = Home::new();
    let good = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0"], 0).json();
    let bad = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0"], 0).json();
    let bad_token = bad["token"].as_str().unwrap();
    h.db().execute("UPDATE tasks SET record = '{ torn' WHERE token = ?1", [bad_token]).unwrap();
    let r = h.run(&["--json", "list"], 0);
    assert_eq!(r.json()["count"], 1);
    assert_eq!(r.json()["tasks"][0]["token"], good["token"]);
    assert!(r.stderr.contains(bad_token), "{}", r.stderr);
    let r = h.run(&["status", bad_token], 70);
    assert!(r.stderr.contains("damaged"), "{}", r.stderr);
}

#[test]
fn a_task_past_its_deadline_is_expired() {
    let h = Home::new();
    let t0 = Instant::now();
    let v = h.run(&["--json", "run", "--sync", "--timeout", "1s", "--", &fake_agent(), "sleep", "30"], 1).json();
    assert!(t0.elapsed() >= Duration::from_secs(1));
    assert!(t0.elapsed() < Duration::from_secs(20), "took {:?}", t0.elapsed());
    assert_eq!(v["status"], "expired");
    assert_eq!(v["note"], "the task's deadline passed");
    assert_eq!(v["summary"], "working for 30 s");
}

#[test]
fn prune_removes_finished_tasks_only_as_asked_and_never_a_running_one() {
    let h = Home::new();
    let fake = fake_agent();
    let mut finished = Vec::new();
    for i in 0..3 {
        let v = h.run(&["--json", "run", "--", &fake, "sleep", "0", &format!("n{i}")], 0).json();
        finished.push((v["token"].as_str().unwrap().to_owned(), v["log_path"].as_str().unwrap().to_owned()));
    }
    let running = h.start(&["sleep", "30"]);

    let r = h.run(&["prune"], 2);
    assert!(r.stderr.contains("--older-than") && r.stderr.contains("--keep"), "{}", r.stderr);
    let dry = h.run(&["--json", "prune", "--keep", "1", "--dry-run"], 0).json();
    assert_eq!((dry["count"].as_u64(), dry["dry_run"].as_bool()), (Some(2), Some(true)));
    assert_eq!(h.run(&["--json", "list"], 0).json()["count"], 4, "a dry run removed something");

    assert_eq!(h.run(&["--json", "prune", "--older-than", "1h"], 0).json()["count"], 0);
    // A lead took the first two tasks' events; the third's is still waiting.
    for (token, _) in &finished[..2] {
        assert_eq!(h.run(&["--json", "wait", "--timeout", "10s"], 0).json()["token"], token.as_str());
    }
    let pruned = h.run(&["--json", "prune", "--keep", "1"], 0).json();
    assert_eq!(pruned["events_removed"], 2, "{pruned}");
    let events = h.run(&["--json", "events"], 0).json();
    let left: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["token"].as_str().unwrap()).collect();
    assert_eq!(left, [finished[2].0.as_str()], "only the event no one took stays");
    let removed: Vec<&str> =
        pruned["removed"].as_array().unwrap().iter().map(|t| t["token"].as_str().unwrap()).collect();
    assert_eq!(removed.len(), 2);
    assert!(!removed.contains(&finished[2].0.as_str()), "--keep 1 must spare the newest");
    for (token, log) in &finished[..2] {
        assert!(!Path::new(log).exists(), "{token}'s log is still there");
        assert!(!h.path().join("tasks").join(token).exists());
        h.run(&["status", token], 2);
    }
    let everything = h.run(&["--json", "prune", "--older-than", "0s"], 0).json();
    assert_eq!(everything["count"], 1);
    assert_eq!(everything["events_removed"], 1, "a removed task's events go with it, taken or not");
    assert_eq!(h.run(&["--json", "events"], 0).json()["count"], 0);
    assert_eq!(h.run(&["--json", "wait", "--timeout", "0.2s"], 124).json()["type"], "timeout");
    let left = h.run(&["--json", "list"], 0).json();
    assert_eq!(left["count"], 1);
    assert_eq!(left["tasks"][0]["token"], running.as_str());
    assert_eq!(left["tasks"][0]["status"], "running");
    h.run(&["halt", &running], 0);
}

#[test]
fn a_store_of_schema_1_is_brought_up_to_date_with_its_tasks() {
    let h = Home::new();
    let v = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0"], 0).json();
    h.db()
        .execute_batch(
            "UPDATE tasks SET spec = (SELECT spec FROM specs WHERE specs.token = tasks.token); DROP TABLE specs; \
             ALTER TABLE tasks DROP COLUMN summary; \
             DROP INDEX tasks_by_status; DROP INDEX tasks_by_role; DROP TABLE questions; DROP TABLE mcp_tasks; \
             DROP TRIGGER tasks_pool_state_saved; DROP TRIGGER tasks_pool_state_written; \
             DROP INDEX tasks_in_pools; ALTER TABLE tasks DROP COLUMN pool_state; DROP INDEX tasks_by_queue_seq; \
             ALTER TABLE tasks DROP COLUMN pool; \
             ALTER TABLE tasks DROP COLUMN queue_seq; PRAGMA user_version = 1;",
        )
        .unwrap();
    let listed = h.run(&["--json", "list", "--status", "completed"], 0).json();
    assert_eq!(listed["tasks"][0]["token"], v["token"], "{listed}");
    let db = h.db();
    let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    let indexes: i64 = db
        .query_row(
            "SELECT count(*) FROM sqlite_master \
             WHERE name IN ('tasks_by_status', 'tasks_by_role', 'questions', 'mcp_tasks', 'tasks_in_pools', \
             'tasks_pool_state_saved', 'tasks_pool_state_written')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!((version, indexes), (11, 7));
    // An MCP task handed out before turns were kept stands for the first turn.
    let turn: i64 = db
        .query_row("SELECT dflt_value FROM pragma_table_info('mcp_tasks') WHERE name = 'turn'", [], |r| {
            r.get::<_, String>(0)
        })
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(turn, 1);
}

#[test]
fn a_home_that_cannot_be_a_directory_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "keep me").unwrap();
    for (home, reason) in [(file.clone(), "is not a directory"), (file.join("sub"), "cannot create home")] {
        let out = std::process::Command::new(crate::common::BIN)
            .args(["--home", home.to_str().unwrap(), "list"])
            .output()
            .unwrap();
        let r = crate::common::check(&["list"], out, 2);
        assert!(r.stderr.contains(reason) && r.stderr.contains("--home"), "{}", r.stderr);
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me", "the file was touched");
}

#[test]
fn refused_commands_and_commands_that_only_read_create_no_home() {
    let h = Home::under("not/yet/here");
    let top = h.path().parent().unwrap().parent().unwrap().to_owned();
    for args in [
        vec!["ask", "my role", "q"],
        vec!["status", "../../etc"],
        vec!["run", "--session", "bad name", "--", "true"],
        vec!["run", "--timeout", "soon", "--", "true"],
        vec!["run", "--", "no-such-command-anywhere"],
        vec!["ask", "--cwd", "/no/such/dir", "reviewer", "q"],
    ] {
        h.run(&args, 2);
        assert!(!top.exists(), "{args:?} created {}", top.display());
    }
    for args in [
        vec!["status", "abcdef"],
        vec!["list"],
        vec!["logs", "abcdef"],
        vec!["await", "abcdef"],
        vec!["halt", "abcdef"],
        vec!["events"],
        vec!["prune", "--keep", "1"],
    ] {
        let r = h.run(&[&["--json"], args.as_slice()].concat(), 2);
        assert_eq!(r.json()["kind"], "no_home", "{args:?}: {}", r.stdout);
        assert!(r.stderr.contains("no home at") && r.stderr.contains("--home"), "{}", r.stderr);
        assert!(!top.exists(), "{args:?} created {}", top.display());
    }
    // The first command that starts something makes it.
    h.run(&["run", "--", &fake_agent(), "sleep", "0"], 0);
    assert_eq!(h.run(&["--json", "list"], 0).json()["count"], 1);
}

#[test]
fn prune_removes_more_tasks_than_one_batch_and_leaves_nothing_of_them() {
    // prune removes tasks 256 to a transaction: 300 spans two batches.
    let h = Home::new();
    let tokens: Vec<String> = (0..300).map(|_| h.start(&["true"])).collect();
    wait_until(Duration::from_secs(120), "every task to end", || h.all_ended());
    let pruned = h.run(&["--json", "prune", "--older-than", "0s"], 0).json();
    assert_eq!(
        (pruned["count"].as_u64(), pruned["events_removed"].as_u64()),
        (Some(300), Some(300)),
        "{}",
        pruned["count"]
    );
    assert_eq!(h.run(&["--json", "list"], 0).json()["count"], 0);
    assert_eq!(h.run(&["--json", "events"], 0).json()["count"], 0);
    let history = h.path().join("subagents/run/data/history");
    let left: Vec<_> = std::fs::read_dir(&history).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "files left in the history: {left:?}");
    for t in &tokens {
        assert!(!h.path().join("tasks").join(t).exists(), "task {t}'s directory is still there");
    }
}

#[test]
fn prune_removes_what_its_dry_run_listed_even_while_a_supervisor_is_finishing() {
    let h = Home::new();
    // The agent leaves a child that ignores SIGTERM: its supervisor spends the grace period
    // ending it after the final record is written, holding the task's lock. (It ends after the
    // 5 s grace: `--sync`, for a loaded machine may take the rest of the 10 s hybrid wait.)
    let script = r#"trap "" TERM; (while :; do sleep 1; done) & echo "> left one behind""#;
    let v = h.run(&["--json", "run", "--sync", "--", "sh", "-c", script], 0).json();
    assert_eq!(v["status"], "completed");
    let dry = h.run(&["--json", "prune", "--older-than", "0s", "--dry-run"], 0).json();
    assert_eq!(dry["count"], 1, "{dry}");
    let real = h.run(&["--json", "prune", "--older-than", "0s"], 0).json();
    assert_eq!(real["count"], 1, "{real}");
    assert_eq!(h.run(&["--json", "list"], 0).json()["count"], 0);
}

/// A copy of the home agentctl 0.1.0 wrote (see fixtures/homes/make-0.1.0.sh) at `h`.
fn copy_legacy_home(h: &Home) {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    copy(&copy_of_fixture(""), h.path());
}

#[test]
fn a_home_written_by_the_previous_release_opens_with_every_task_and_waiting_event() {
    let h = Home::new();
    copy_legacy_home(&h);
    let listed = h.run(&["--json", "list"], 0).json();
    let tasks: Vec<(&str, &str)> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["token"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    // The one whose supervisor was killed is found dead, as it would have been before.
    assert_eq!(tasks, [("0e03ed", "lost"), ("c49036", "completed"), ("68a936", "failed"), ("58a654", "completed")]);
    assert_eq!(h.run(&["--json", "status", "58a654"], 0).json()["summary"], "the first answer");
    let events = h.run(&["--json", "events"], 0).json();
    let seen: Vec<(u64, bool)> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["seq"].as_u64().unwrap(), e["consumed"].as_bool().unwrap()))
        .collect();
    assert_eq!(seen, [(1, true), (2, false), (3, false), (4, false), (5, false)], "{events}");
    // The lead gets what it had not taken, in order, and nothing twice.
    let next = |session: &str| h.run(&["--json", "wait", "--session", session, "--timeout", "5s"], 0).json();
    let e = next("lead");
    assert_eq!((e["seq"].as_u64(), e["token"].as_str()), (Some(2), Some("68a936")));
    assert_eq!(next("lead")["text"], "progress: half done");
    h.run(&["--json", "wait", "--session", "lead", "--timeout", "0.2s"], 124);
    assert_eq!(next("other")["token"], "c49036");
    assert_eq!(next("default")["token"], "0e03ed");
    // New tasks and events go on from there; the files the release kept are gone.
    let v = h.run(&["--json", "run", "--session", "lead", "--", &fake_agent(), "sleep", "0", "new"], 0).json();
    let e = next("lead");
    assert_eq!((e["seq"].as_u64(), &e["token"]), (Some(6), &v["token"]));
    for gone in ["tasks/58a654/record.json", "tasks/58a654/spec.json", "events/log.jsonl", "events/consumed"] {
        assert!(!h.path().join(gone).exists(), "{gone} is still there");
    }
}

#[test]
fn a_supervisor_of_the_previous_release_still_running_at_the_upgrade_is_taken_in_when_it_ends() {
    let h = Home::new();
    copy_legacy_home(&h);
    // The first command imports the home without looking at tasks.
    h.run(&["--json", "events", "--session", "none"], 0);
    // As 0.1.0's supervisor of 0e03ed would end it: its record file, then its event.
    let task = h.path().join("tasks/0e03ed");
    let mut rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(copy_of_fixture("tasks/0e03ed/record.json")).unwrap()).unwrap();
    rec["ended"] = serde_json::json!({"outcome": {"status": "completed"}, "at_ms": 1795359570000u64, "line_count": 1, "note": null});
    std::fs::write(task.join("record.json"), rec.to_string()).unwrap();
    let event = r#"{"type":"task_finished","seq":5,"time":"2026-11-22T15:00:00.000Z","session":"default","token":"0e03ed","role":"run","status":"completed","exit_code":0,"summary":"late","text":null}"#;
    std::fs::write(h.path().join("events/log.jsonl"), format!("{event}\n")).unwrap();
    let v = h.run(&["--json", "status", "0e03ed"], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    let e = h.run(&["--json", "wait", "--session", "default", "--timeout", "5s"], 0).json();
    assert_eq!((e["token"].as_str(), e["summary"].as_str()), (Some("0e03ed"), Some("late")));
    assert!(e["seq"].as_u64().unwrap() >= 5);
    h.run(&["--json", "wait", "--session", "default", "--timeout", "0.2s"], 124);
}

/// A file of that home as the release left it.
fn copy_of_fixture(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/homes/0.1.0").join(rel)
}

#[test]
fn the_first_command_on_a_home_of_the_previous_release_can_be_a_wait() {
    let h = Home::new();
    copy_legacy_home(&h);
    // Event 1 was taken under 0.1.0: the first wait gets event 2, never 1 again.
    let e = h.run(&["--json", "wait", "--session", "lead", "--timeout", "5s"], 0).json();
    assert_eq!((e["seq"].as_u64(), e["token"].as_str()), (Some(2), Some("68a936")), "{e}");
}

#[test]
fn prune_gives_the_space_of_what_it_removed_back() {
    let h = Home::new();
    let big = "z".repeat(200_000);
    for _ in 0..20 {
        let mut n =
            h.cmd().args(["notify", "--session", "s", "-"]).stdin(std::process::Stdio::piped()).spawn().unwrap();
        std::io::Write::write_all(&mut n.stdin.take().unwrap(), big.as_bytes()).unwrap();
        assert!(n.wait().unwrap().success());
        h.run(&["wait", "--session", "s", "--timeout", "5s"], 0);
    }
    h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0"], 0);
    let size = || std::fs::metadata(h.path().join("agentctl.db")).unwrap().len();
    let pages = |what: &str| -> i64 { h.db().query_row(&format!("PRAGMA {what}"), [], |r| r.get(0)).unwrap() };
    let pruned = h.run(&["--json", "prune", "--keep", "0"], 0).json();
    assert_eq!((pruned["count"].as_u64(), pruned["events_removed"].as_u64()), (Some(1), Some(21)), "{pruned}");
    assert_eq!(pages("freelist_count"), 0, "freed pages were not given back");
    assert!(size() < 1 << 20, "the store is still {} bytes", size());
    let wal = std::fs::metadata(h.path().join("agentctl.db-wal")).map_or(0, |m| m.len());
    assert!(wal < 1 << 20, "the WAL is still {wal} bytes");
}

#[test]
fn the_write_ahead_log_stays_short_when_every_process_is_short_lived() {
    // Each task writes ~20 pages of log; no process outlives its command, so nothing but
    // agentctl itself ever empties the log (SQLite's own close-time checkpoint is off).
    let h = Home::new();
    let wal = || std::fs::metadata(h.path().join("agentctl.db-wal")).map_or(0, |m| m.len());
    let mut longest = 0;
    for _ in 0..60 {
        h.run(&["run", "--sync", "--", "true"], 0);
        longest = longest.max(wal());
    }
    // 60 tasks would leave ~5 MB of log; a process that opens the store alone replays it all.
    assert!(longest < 1 << 20, "the log grew to {longest} bytes");
}

#[test]
fn a_start_on_a_store_of_a_newer_release_is_refused_and_leaves_nothing() {
    let h = Home::new();
    h.run(&["run", "--sync", "--", "true"], 0);
    let entries = |dir: &str| std::fs::read_dir(h.path().join(dir)).unwrap().count();
    let before = (entries("tasks"), entries("subagents/run/data/history"));
    // As a newer release leaves it: its schema, and the mark that says it beside the database
    // (which a start reads rather than open the database).
    h.db().pragma_update(None, "user_version", 99).unwrap();
    std::fs::write(h.path().join("schema"), "99\n").unwrap();
    let r = h.run(&["run", "--async", "--", "true"], 2);
    assert!(r.stderr.contains("written by a newer agentctl"), "{}", r.stderr);
    assert_eq!((entries("tasks"), entries("subagents/run/data/history")), before, "the refused start left files");
}
