//! Files of the home that are not what agentctl wrote: symlinks planted in place of a log, a
//! summary or a record; a log replaced by a FIFO or a device; a log cut short or deleted while
//! the task runs; a read-only home. No read follows a symlink, blocks, or runs unbounded.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::common::{Home, fake_agent, wait_until};
use crate::mounts::Mount;
use crate::raw_mcp::RawMcp;

const HANG: Duration = Duration::from_secs(20);

fn log_of(h: &Home, token: &str) -> PathBuf {
    PathBuf::from(h.status(token)["log_path"].as_str().unwrap())
}

fn replace_with_symlink(path: &Path, target: &Path) {
    std::fs::remove_file(path).unwrap();
    symlink(target, path).unwrap();
}

#[test]
fn symlinks_planted_as_files_are_refused_never_followed() {
    let h = Home::new();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "SECRET outside the home\n").unwrap();
    let v = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0", "real answer"], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    let log = PathBuf::from(v["log_path"].as_str().unwrap());
    let summary = PathBuf::from(v["summary_path"].as_str().unwrap());

    replace_with_symlink(&log, &secret);
    for args in [vec!["logs", &token], vec!["--json", "logs", &token], vec!["logs", &token, "--tail", "1"]] {
        let r = h.run(&args, 2);
        assert!(!r.stdout.contains("SECRET"), "{args:?} followed the symlink: {}", r.stdout);
        assert!(r.stderr.contains("is a symlink"), "{args:?}: {}", r.stderr);
    }
    replace_with_symlink(&summary, &secret);
    let st = h.run(&["--json", "status", &token], 0).json();
    assert!(!st.to_string().contains("SECRET"), "{st}");
    assert!(st["note"].as_str().unwrap().contains("is a symlink"), "{st}");
    let mut mcp = RawMcp::start(&h, &[]);
    let page = mcp.call("logs", json!({"token": token}));
    assert_eq!(page["isError"], true, "{page}");
    assert!(!page.to_string().contains("SECRET"), "{page}");
    drop(mcp);

    // A directory of the home replaced by a symlink is refused just the same (a running
    // task's: its lock is looked at).
    let other = h.start(&["sleep", "30"]);
    let task_dir = h.path().join("tasks").join(&other);
    let moved = outside.path().join("moved");
    std::fs::rename(&task_dir, &moved).unwrap();
    symlink(&moved, &task_dir).unwrap();
    let r = h.run(&["status", &other], 2);
    assert!(r.stderr.contains("is a symlink"), "{}", r.stderr);
    std::fs::remove_file(&task_dir).unwrap();
    std::fs::rename(&moved, &task_dir).unwrap();
    h.run(&["halt", &other], 0);

    // The database too.
    let db = h.path().join("agentctl.db");
    let copy = outside.path().join("agentctl.db");
    std::fs::copy(&db, &copy).unwrap();
    replace_with_symlink(&db, &copy);
    let r = h.run(&["status", &token], 2);
    assert!(r.stderr.contains("is a symlink"), "{}", r.stderr);

    // The home's agents.toml too.
    let agents = outside.path().join("agents.toml");
    std::fs::write(&agents, "[default]\ncommand = [\"sh\", \"-c\", \"echo SECRET\"]\n").unwrap();
    symlink(&agents, h.path().join("agents.toml")).unwrap();
    let r = h.run(&["ask", "reviewer", "hi"], 2);
    assert!(r.stderr.contains("is a symlink"), "{}", r.stderr);
}

#[test]
fn a_log_replaced_by_a_fifo_or_a_device_blocks_no_reader_and_not_the_supervisor() {
    let h = Home::new();
    let token = h.start(&["tick", "1000", "0.05"]);
    wait_until(HANG, "some output", || h.status(&token)["line_count"].as_u64() >= Some(2));
    let log = log_of(&h, &token);
    std::fs::remove_file(&log).unwrap();
    nix::unistd::mkfifo(&log, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();

    for args in [vec!["--json", "list"], vec!["--json", "status", &token]] {
        let v = h.run_within(HANG, &args, 0).json();
        assert!(v.to_string().contains("a FIFO"), "{args:?}: {v}");
    }
    h.run_within(HANG, &["logs", &token], 2);
    // The MCP server answers call after call (each used to hold one of its threads forever).
    let mut mcp = RawMcp::start(&h, &[]);
    for _ in 0..4 {
        let r = mcp.call("list", json!({}));
        assert_eq!(r["structuredContent"]["count"], 1, "{r}");
    }
    drop(mcp);
    // The supervisor still halts and sums up from the file the agent was writing.
    let v = h.run_within(HANG, &["--json", "halt", &token, "--grace", "1s"], 0).json();
    assert_eq!(v["status"], "cancelled");
    assert!(v["summary"].as_str().unwrap().contains("tick 1"), "{v}");

    let other = h.start(&["sleep", "60"]);
    let log = log_of(&h, &other);
    std::fs::remove_file(&log).unwrap();
    symlink("/dev/zero", &log).unwrap();
    let v = h.run_within(HANG, &["--json", "status", &other], 0).json();
    assert_eq!(v["status"], "running");
    assert!(v["note"].as_str().unwrap().contains("is a symlink"), "{v}");
    h.run_within(HANG, &["halt", &other, "--grace", "0.1s"], 0);
}

#[test]
fn a_log_cut_short_in_place_is_counted_right_and_paged_to_its_end() {
    let h = Home::new();
    let gate = h.path().join("gate");
    let script = format!(
        "for i in $(seq 200); do echo line $i; done; while [ ! -e '{}' ]; do sleep 0.05; done; echo '> after the cut'",
        gate.display()
    );
    let token = h.start_script(&script);
    wait_until(HANG, "200 lines", || h.status(&token)["line_count"] == 200);
    let log = log_of(&h, &token);
    // logrotate's copytruncate: the file is cut to nothing while the agent goes on appending.
    std::fs::OpenOptions::new().write(true).open(&log).unwrap().set_len(0).unwrap();
    std::fs::write(&gate, "").unwrap();
    let v = h.run(&["--json", "await", &token, "--timeout", "20s"], 0).json();
    assert_eq!((v["line_count"].as_u64(), v["summary"].as_str()), (Some(1), Some("after the cut")), "{v}");
    assert_eq!(h.status(&token)["line_count"], 1);

    // Paging never stands still: past the end there is no next page.
    let mut mcp = RawMcp::start(&h, &[]);
    for offset in [0u64, 1, 150, 10_000] {
        let page = mcp.call("logs", json!({"token": token, "offset": offset, "limit": 50}));
        let s = &page["structuredContent"];
        let next = s["next_offset"].as_u64();
        assert!(next.is_none_or(|n| n > offset), "offset {offset}: next {next:?}: {s}");
    }
    let page = mcp.call("logs", json!({"token": token, "offset": 0, "limit": 0}));
    assert!(page["structuredContent"]["next_offset"].as_u64().is_none_or(|n| n > 0), "{page}");
}

#[test]
fn a_log_deleted_while_the_task_runs_still_gives_the_summary() {
    let h = Home::new();
    let token = h.start(&["tick", "3", "0.3"]);
    wait_until(HANG, "some output", || h.status(&token)["line_count"].as_u64() >= Some(1));
    std::fs::remove_file(log_of(&h, &token)).unwrap();
    let v = h.run(&["--json", "await", &token, "--timeout", "20s"], 0).json();
    assert_eq!(v["summary"], "ticked 3", "{v}");
    assert_eq!(v["line_count"], 4, "{v}");
}

#[test]
fn a_read_only_home_can_be_read() {
    let h = Home::under("home");
    let done = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0", "finished"], 0).json();
    let running = h.start(&["sleep", "60"]);
    let lost_pids = h.path().parent().unwrap().join("pids");
    let lost = h.start(&["stubborn", lost_pids.to_str().unwrap()]);
    crate::common::read_pids(&lost_pids);
    h.kill_supervisor(&lost);

    let ro = Mount::read_only(h.path(), &h.path().parent().unwrap().join("ro"));
    let list = h.run_at(&ro.0, HANG, &["--json", "list"], 0).json();
    let statuses: Vec<_> = list["tasks"].as_array().unwrap().iter().map(|t| t["status"].as_str().unwrap()).collect();
    assert_eq!(statuses.len(), 3, "{list}");
    assert!(statuses.contains(&"running") && statuses.contains(&"completed"), "{list}");
    assert_eq!(h.run_at(&ro.0, HANG, &["--json", "status", &running], 0).json()["status"], "running");
    let v = h.run_at(&ro.0, HANG, &["--json", "status", &lost], 1).json();
    assert_eq!(v["status"], "lost", "{v}");
    assert!(v["note"].as_str().unwrap().contains("could not be recorded"), "{v}");
    let r = h.run_at(&ro.0, HANG, &["logs", done["token"].as_str().unwrap()], 0);
    assert!(r.stdout.contains("finished"), "{}", r.stdout);
    h.run_at(&ro.0, HANG, &["--json", "await", &running, "--timeout", "0.2s"], 124);
    // Starting or taking something writes: refused as the user's situation (exit 2), saying
    // what still works and what to do.
    for args in [&["run", "--", "true"][..], &["wait", "--timeout", "0s"][..]] {
        let r = h.run_at(&ro.0, HANG, args, 2);
        assert!(r.stderr.contains("the home cannot be written (a read-only file system"), "{}", r.stderr);
        assert!(r.stderr.contains("pick a writable home with --home or AGENTCTL_HOME"), "{}", r.stderr);
    }
    assert_eq!(h.run_at(&ro.0, HANG, &["--json", "run", "--", "true"], 2).json()["kind"], "read_only");
    drop(ro);
    h.run(&["halt", &running, "--grace", "0.1s"], 0);
}

#[test]
fn a_new_home_on_a_read_only_mount_is_refused_with_one_warning_and_a_hint() {
    let h = Home::under("home");
    let dir = h.path().parent().unwrap().join("empty");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let ro = Mount::read_only(&dir, &h.path().parent().unwrap().join("ro"));
    let r = h.run_at(&ro.0, HANG, &["run", "--", "true"], 2);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "one warning, one error: {}", r.stderr);
    assert!(
        lines[0].starts_with("agentctl: warning: home ") && lines[0].contains("cannot be made private"),
        "{}",
        r.stderr
    );
    assert!(lines[1].starts_with("agentctl: error: ") && lines[1].contains("pick a writable home"), "{}", r.stderr);
}

#[test]
fn a_tail_page_cut_by_its_size_says_where_it_starts_and_goes_on() {
    let h = Home::new();
    // 100 lines of 1000 characters: a 64 KiB page holds fewer than the 100 asked for.
    let script = "i=1; while [ $i -le 100 ]; do printf 'line %03d %0990d\\n' $i 0; i=$((i + 1)); done";
    let v = h.run(&["--json", "run", "--", "sh", "-c", script], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    let mut mcp = RawMcp::start(&h, &[]);
    let page = mcp.call("logs", json!({"token": token, "tail_lines": 100}));
    let s = &page["structuredContent"];
    assert_eq!(s["offset"], 0, "the page starts 100 lines before the end: {s}");
    let returned = s["lines"].as_array().unwrap().len() as u64;
    assert!(returned < 100, "an 8 KB result holds a few of these lines: {s}");
    assert!(s["lines"][0].as_str().unwrap().starts_with("line 001"), "{s}");
    // It ends inside its last line, and says where that line goes on.
    let last = s["lines"][returned as usize - 1].as_str().unwrap().chars().count() as u64;
    assert_eq!(s["next_offset"].as_u64(), Some(returned - 1), "{s}");
    assert_eq!(s["next_column"].as_u64(), Some(last), "{s}");
    let next = mcp.call("logs", json!({"token": token, "offset": returned - 1, "column": last}));
    let rest = next["structuredContent"]["lines"][0].as_str().unwrap().to_owned();
    assert_eq!(rest.len() as u64, 999 - last, "the rest of line {returned}: {rest:.20}");
    // Page after page, the log comes back whole, each page within the budget.
    let (lines, calls) = mcp.read_all(&token, false, 8192);
    let want: Vec<String> = (1..=100).map(|i| format!("line {i:03} {:0990}", 0)).collect();
    assert_eq!(lines, want);
    assert!(calls >= 100 * 1000 / 8192, "{calls} calls");
}
