//! Pools whose waiters cannot act: supervisors stopped (SIGSTOP) anywhere in the line do not keep
//! it from moving, and lose nothing; a waiter of an earlier release that refuses what it is asked
//! is not asked again and again; and with no inotify instance to be had, a raised `parallel`
//! still moves the line.

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::{Home, wait_until};
use crate::stranger::Stranger;

/// The pool's one place, for a role whose tasks run `sleep QUESTION`.
fn agents(runs: &std::path::Path, parallel: u32) -> String {
    format!(
        "[pools.one]\nparallel = {parallel}\n[agents.w]\ncommand = [\"sh\", \"-c\", \"echo {{token}} >> '{}'; sleep $0; echo '> slept'\", \"{{question}}\"]\npool = \"one\"\n",
        runs.display()
    )
}

/// A home whose role `w` runs `sleep QUESTION` in pool `one` (one place), each run adding its
/// token to `runs`.
fn one_place(h: &Home) {
    std::fs::write(h.path().join("agents.toml"), agents(&h.path().join("runs"), 1)).unwrap();
}

fn ask(h: &Home, secs: &str) -> String {
    let v = h.run(&["--json", "ask", "--async", "w", secs], 0).json();
    v["token"].as_str().unwrap().to_owned()
}

/// When the task's run started, once its supervisor has written it.
fn started_at(h: &Home, token: &str) -> Option<u64> {
    h.record(token)["started"]["at_ms"].as_u64()
}

/// Supervisors stopped by a test, woken again however it ends.
struct Stopped(Vec<i64>);

impl Stopped {
    /// Stop task `token`'s supervisor where it waits, not inside a write: a start hands the
    /// task back before its supervisor has saved it, and one stopped holding the store's write
    /// lock would hold up every writer (that is SQLite, not the line). Woken and stopped again
    /// until the store takes a write with it stopped.
    fn stop(&mut self, h: &Home, token: &str) {
        let pid = Pid::from_raw(h.supervisor_pid(token) as i32);
        wait_until(Duration::from_secs(60), "the supervisor stopped outside a write", || {
            kill(pid, Signal::SIGSTOP).unwrap();
            let db = h.db();
            db.busy_timeout(Duration::from_secs(2)).unwrap();
            if db.execute_batch("BEGIN IMMEDIATE; COMMIT").is_ok() {
                return true;
            }
            kill(pid, Signal::SIGCONT).unwrap();
            false
        });
        self.0.push(i64::from(pid.as_raw()));
    }

    fn wake(&mut self, h: &Home, token: &str) {
        let pid = h.supervisor_pid(token);
        kill(Pid::from_raw(pid as i32), Signal::SIGCONT).unwrap();
        self.0.retain(|&p| p != pid);
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        for &pid in &self.0 {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGCONT);
        }
    }
}

/// Each of `tokens` ran exactly once.
fn each_ran_once(h: &Home, tokens: &[&String]) {
    let runs = std::fs::read_to_string(h.path().join("runs")).unwrap();
    let mut ran: Vec<&str> = runs.lines().collect();
    ran.sort_unstable();
    let mut all: Vec<&str> = tokens.iter().map(|t| t.as_str()).collect();
    all.sort_unstable();
    assert_eq!(ran, all, "each task ran exactly once");
}

fn completed(h: &Home, token: &str) {
    let v = h.run_within(Duration::from_secs(60), &["--json", "await", token], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
}

/// The summary of a queued task (its place in line).
fn summary(h: &Home, token: &str) -> String {
    h.status(token)["summary"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_stopped_first_in_line_is_passed_and_takes_the_next_place_when_it_wakes() {
    let h = Home::new();
    one_place(&h);
    let mut stopped = Stopped(Vec::new());
    let holder = ask(&h, "600");
    let waiting: Vec<String> = ["0.3", "600", "0.3"].iter().map(|secs| ask(&h, secs)).collect();
    assert_eq!(h.status(&waiting[0])["status"], "queued");
    stopped.stop(&h, &waiting[0]);
    h.run(&["halt", &holder, "--grace", "0.2s"], 0);
    // The second in line takes the place the first does not take in time.
    // Started, not only given the place (`starting` comes before the start is written).
    wait_until(Duration::from_secs(60), "the second in line to start", || started_at(&h, &waiting[1]).is_some());
    assert_eq!(h.status(&waiting[0])["status"], "queued", "the stopped one cannot have started");
    let freed = h.record(&holder)["ended"]["at_ms"].as_u64().unwrap();
    let started = started_at(&h, &waiting[1]).unwrap();
    assert!(started >= freed + 1500, "passed {} ms after the place came free", started.saturating_sub(freed));
    eprintln!("a stopped first was passed {} ms after the place came free", started - freed);
    // The one passed keeps its place in line, ahead of the third.
    assert!(summary(&h, &waiting[0]).contains("place 1 in line"), "{}", summary(&h, &waiting[0]));
    assert!(summary(&h, &waiting[2]).contains("place 2 in line"), "{}", summary(&h, &waiting[2]));
    // Woken, it takes the next place. (The third, stopped meanwhile, cannot pass it however
    // slowly a loaded machine wakes it.)
    stopped.stop(&h, &waiting[2]);
    stopped.wake(&h, &waiting[0]);
    h.run(&["halt", &waiting[1], "--grace", "0.2s"], 0);
    wait_until(Duration::from_secs(60), "the one passed to start", || h.status(&waiting[0])["status"] != "queued");
    stopped.wake(&h, &waiting[2]);
    completed(&h, &waiting[0]);
    completed(&h, &waiting[2]);
    let starts: Vec<u64> = waiting.iter().map(|t| h.record(t)["started"]["at_ms"].as_u64().unwrap()).collect();
    assert!(starts[0] < starts[2], "the one passed started before the one behind it: {starts:?}");
    each_ran_once(&h, &waiting.iter().chain([&holder]).collect::<Vec<_>>());
}

#[test]
fn a_stopped_waiter_behind_the_first_does_not_keep_those_behind_it_waiting() {
    let h = Home::new();
    one_place(&h);
    let mut stopped = Stopped(Vec::new());
    let holder = ask(&h, "600");
    let waiting: Vec<String> = (0..4).map(|_| ask(&h, "0.3")).collect();
    stopped.stop(&h, &waiting[1]);
    h.run(&["halt", &holder, "--grace", "0.2s"], 0);
    completed(&h, &waiting[0]);
    // The stopped one is first in line now; the third passes it, then the fourth.
    wait_until(Duration::from_secs(60), "the third in line to start", || h.status(&waiting[2])["status"] != "queued");
    completed(&h, &waiting[2]);
    completed(&h, &waiting[3]);
    assert_eq!(h.status(&waiting[1])["status"], "queued", "the stopped one cannot have started");
    stopped.wake(&h, &waiting[1]);
    completed(&h, &waiting[1]);
    each_ran_once(&h, &waiting.iter().chain([&holder]).collect::<Vec<_>>());
}

#[test]
fn two_stopped_waiters_in_a_row_are_passed_after_their_time_each() {
    let h = Home::new();
    one_place(&h);
    let mut stopped = Stopped(Vec::new());
    let holder = ask(&h, "600");
    let waiting: Vec<String> = (0..5).map(|_| ask(&h, "0.3")).collect();
    stopped.stop(&h, &waiting[1]);
    stopped.stop(&h, &waiting[2]);
    h.run(&["halt", &holder, "--grace", "0.2s"], 0);
    completed(&h, &waiting[0]);
    wait_until(Duration::from_secs(60), "the fourth in line to start", || started_at(&h, &waiting[3]).is_some());
    let freed = h.record(&waiting[0])["ended"]["at_ms"].as_u64().unwrap();
    let started = started_at(&h, &waiting[3]).unwrap();
    assert!(started >= freed + 3500, "passed two {} ms after the place came free", started.saturating_sub(freed));
    eprintln!("two stopped in a row were passed {} ms after the place came free", started - freed);
    completed(&h, &waiting[3]);
    completed(&h, &waiting[4]);
    for t in &waiting[1..3] {
        assert_eq!(h.status(t)["status"], "queued", "a stopped one cannot have started");
        stopped.wake(&h, t);
    }
    completed(&h, &waiting[1]);
    completed(&h, &waiting[2]);
    each_ran_once(&h, &waiting.iter().chain([&holder]).collect::<Vec<_>>());
}

/// A waiter of an earlier release, put in line by hand: its lock held and its control socket
/// served by this test, which closes every request it does not know (as that release closes
/// `front`) and keeps the others open; what it was asked, in order.
struct OldWaiter {
    asked: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicUsize>,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl OldWaiter {
    /// In line behind `after` (a queued task of the same pool), as task `token`.
    fn new(h: &Home, after: &str, token: &str) -> OldWaiter {
        // In the database (a start may leave it to its supervisor to put it there).
        h.status(after);
        let dir = h.path().join("tasks").join(token);
        std::fs::create_dir(&dir).unwrap();
        let file = std::fs::File::create(dir.join("lock")).unwrap();
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
        h.db()
            .execute(
                "INSERT INTO tasks (token, created_at_ms, status, role, record, spec, pool, queue_seq) \
                 SELECT ?2, created_at_ms, status, role, replace(record, ?1, ?2), spec, pool, \
                 (SELECT max(queue_seq) + 1 FROM tasks) FROM tasks WHERE token = ?1",
                [after, token],
            )
            .unwrap();
        h.db()
            .execute("INSERT INTO specs (token, spec) SELECT ?2, spec FROM specs WHERE token = ?1", [after, token])
            .unwrap();
        let listener = UnixListener::bind(dir.join("ctl.sock")).unwrap();
        let (asked, connections) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicUsize::new(0)));
        let (seen, counted) = (Arc::clone(&asked), Arc::clone(&connections));
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            for stream in listener.incoming().map_while(Result::ok) {
                counted.fetch_add(1, Ordering::Relaxed);
                let mut line = String::new();
                let _ = BufReader::new(&stream).read_line(&mut line);
                let line = line.trim().to_owned();
                if ["wait", "queue", "place"].contains(&line.as_str()) {
                    kept.push(stream);
                }
                seen.lock().unwrap().push(line);
            }
        });
        OldWaiter { asked, connections, _lock: lock }
    }
}

#[test]
fn a_waiter_of_an_earlier_release_that_refuses_a_request_is_asked_a_plainer_one_not_again_and_again() {
    let h = Home::new();
    one_place(&h);
    let holder = ask(&h, "600");
    let (first, second) = (ask(&h, "600"), ask(&h, "600"));
    let old = OldWaiter::new(&h, &second, "0000aa");
    // Fourth in line, it asks the three ahead to say when it is among the first three.
    let fourth = ask(&h, "600");
    assert!(summary(&h, &fourth).contains("place 4 in line"), "{}", summary(&h, &fourth));
    // Asked again and again, the old one would be asked `front` a hundred times at once.
    wait_until(Duration::from_secs(30), "the old waiter to be asked what it knows", || {
        old.asked.lock().unwrap().iter().any(|a| a == "queue") || old.connections.load(Ordering::Relaxed) >= 100
    });
    let asked = old.asked.lock().unwrap().clone();
    assert!(old.connections.load(Ordering::Relaxed) < 10, "asked {asked:?}");
    assert_eq!(asked.first().map(String::as_str), Some("front 2"), "{asked:?}");
    // The line still moves past it as it moves: once the two ahead of it have run, the old one
    // is first (it never takes a place: this test does not), and the fourth second.
    for t in [&holder, &first, &second, &fourth] {
        h.run_within(Duration::from_secs(30), &["halt", t, "--grace", "0.2s"], 0);
    }
}

#[test]
fn with_no_inotify_instance_left_a_raised_parallel_still_starts_waiting_tasks() {
    crate::needs_root("it runs the pool as a user of its own, whose inotify instances it takes");
    let u = Stranger::new();
    let runs = u.out().join("runs");
    u.write("agents.toml", &agents(&runs, 1));
    let ask = |secs: &str| u.run(&["--json", "ask", "--async", "w", secs])["token"].as_str().unwrap().to_owned();
    let status = |t: &str| u.run(&["--json", "status", t])["status"].as_str().unwrap().to_owned();
    let _holders = u.take_instances(0);
    let holder = ask("600");
    let waiting: Vec<String> = (0..3).map(|_| ask("600")).collect();
    assert!(waiting.iter().all(|t| status(t) == "queued"));
    for t in &waiting {
        let lock = std::fs::read_to_string(u.home().join("tasks").join(t).join("lock")).unwrap();
        let pid = lock.split_whitespace().next().unwrap().parse().unwrap();
        assert_eq!(crate::root::inotify_instances(pid), 0, "a waiter holds an inotify instance");
    }
    u.write("agents.toml", &agents(&runs, 4));
    wait_until(Duration::from_secs(30), "the three waiting to start", || {
        waiting.iter().all(|t| status(t) == "running")
    });
    for t in waiting.iter().chain([&holder]) {
        u.run(&["--json", "halt", t, "--grace", "0.2s"]);
    }
}
