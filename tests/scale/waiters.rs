//! A thousand waiting CLIs of one user at once (`wait`, `ask-lead` and `inbox --wait` inside
//! tasks), far beyond the inotify instances the user may hold: every one is answered, and every
//! event goes to exactly one of them.
//!
//! The limit is per user: the waiters run as a fresh uid of their own, whose instances the test
//! takes first (all but `FREE`), whatever `fs.inotify.max_user_instances` says.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{alive, check, wait_until};
use crate::stranger::Stranger;

/// `wait` CLIs, on each of `SESSIONS` sessions.
const WAITS_PER_SESSION: usize = 50;
const SESSIONS: usize = 8;
/// Tasks whose processes ask the lead, and tasks whose processes read their inbox.
const ASKING_TASKS: usize = 30;
const READING_TASKS: usize = 30;
/// Waiting processes in each task.
const PER_TASK: usize = 10;
const WAITERS: usize = SESSIONS * WAITS_PER_SESSION + (ASKING_TASKS + READING_TASKS) * PER_TASK;
/// Instances left to the waiters: a few get one, the others wait without.
const FREE: u32 = 16;
/// Hang guards, not timing claims.
const LONG: Duration = Duration::from_secs(300);
const WAIT_ARG: &str = "300s";

/// Whether process `pid` waits on a watch: its thread that reads an inotify instance, or the
/// one that looks at the watched files without (`Some(true)`).
fn waits_without_instance(pid: u32) -> Option<bool> {
    let threads = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let names: Vec<String> = threads.flatten().filter_map(|t| fs::read_to_string(t.path().join("comm")).ok()).collect();
    let has = |n: &str| names.iter().any(|c| c.trim() == n);
    if has("agentctl-poll") {
        Some(true)
    } else if has("agentctl-watch") {
        Some(false)
    } else {
        None
    }
}

/// The pids a task's script wrote to `file`, once all `PER_TASK` are there.
fn task_pids(file: &Path) -> Option<Vec<u32>> {
    let pids: Vec<u32> = fs::read_to_string(file).ok()?.split_whitespace().filter_map(|p| p.parse().ok()).collect();
    (pids.len() == PER_TASK).then_some(pids)
}

/// A task that starts `PER_TASK` waiting agentctl processes (`args`, then the number), writes
/// their pids to `OUT/TOKEN.pids` and each one's output to `OUT/TOKEN.N`, then its exit code.
fn script(out: &Path, args: &str) -> String {
    format!(
        r#"o={out}/$AGENTCTL_TOKEN
for i in $(seq 1 {PER_TASK}); do agentctl {args} > "$o.$i" 2>&1 & echo $! >> "$o.pids"; done
i=0; for p in $(cat "$o.pids"); do i=$((i+1)); wait $p; echo $? >> "$o.$i"; done"#,
        out = out.display()
    )
}

/// What a task's waiting process `i` printed, and its exit code.
fn task_output(out: &Path, token: &str, i: usize) -> (String, i32) {
    let text = fs::read_to_string(out.join(format!("{token}.{i}"))).unwrap();
    let (printed, code) = text.trim_end().rsplit_once('\n').unwrap_or(("", text.trim()));
    (printed.to_owned(), code.parse().unwrap_or(-1))
}

#[test]
fn a_thousand_waiting_clis_beyond_the_inotify_limit_are_all_answered_each_event_once() {
    crate::needs_root("it runs the waiters as a user of their own");
    let started = Instant::now();
    let u = Stranger::new();
    let _holders = u.take_instances(FREE);
    let out = u.out();

    // The tasks, whose processes ask the lead or read their inbox.
    let start = |args: &str| {
        let v = u.run(&["--json", "run", "--async", "--session", "lead", "--", "sh", "-c", &script(&out, args)]);
        v["token"].as_str().unwrap().to_owned()
    };
    let asking: Vec<String> =
        (0..ASKING_TASKS).map(|_| start(&format!(r#"ask-lead "$AGENTCTL_TOKEN $i" --timeout {WAIT_ARG}"#))).collect();
    let reading: Vec<String> = (0..READING_TASKS).map(|_| start(&format!("inbox --wait {WAIT_ARG}"))).collect();
    // The lead's waits, on several sessions.
    let mut waits: Vec<(usize, Child)> = Vec::new();
    for n in 0..SESSIONS * WAITS_PER_SESSION {
        let (session, file) = (format!("s{}", n % SESSIONS), out.join(format!("wait.{n}")));
        let child = u
            .cmd()
            .args(["--json", "wait", "--session", &session, "--timeout", WAIT_ARG])
            .stdout(File::create(&file).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        waits.push((n % SESSIONS, child));
    }

    // Every one of them waits at once (nothing has been posted yet), most without an instance.
    let mut waiters: Vec<(u32, PathBuf)> =
        waits.iter().enumerate().map(|(n, (_, c))| (c.id(), out.join(format!("wait.{n}")))).collect();
    for t in asking.iter().chain(&reading) {
        let file = out.join(format!("{t}.pids"));
        wait_until(LONG, "a task to start its waiters", || task_pids(&file).is_some());
        let pids = task_pids(&file).unwrap().into_iter().enumerate();
        waiters.extend(pids.map(|(i, p)| (p, out.join(format!("{t}.{}", i + 1)))));
    }
    assert_eq!(waiters.len(), WAITERS);
    let (mut without, mut unready) = (0, waiters.clone());
    wait_until(LONG, "every waiter to watch", || {
        unready.retain(|(pid, printed)| {
            let printed = || fs::read_to_string(printed).unwrap_or_default();
            assert!(alive((*pid).into()), "a waiter ended before anything was posted: {}", printed());
            let seen = waits_without_instance(*pid);
            without += usize::from(seen == Some(true));
            seen.is_none()
        });
        unready.is_empty()
    });
    assert!(waiters.iter().all(|(pid, _)| alive((*pid).into())), "a waiter ended before anything was posted");
    assert!(without >= WAITERS - FREE as usize, "only {without} of {WAITERS} waiters had no inotify instance");
    eprintln!("{WAITERS} waiters ({without} without an inotify instance) after {:?}", started.elapsed());

    // The lead answers each question, sends each reading task's processes a message each, and
    // posts one event per waiting `wait`.
    let questions = || -> Vec<(String, String)> {
        let events = u.run(&["--json", "events", "--session", "lead"]);
        let events = events["events"].as_array().unwrap().iter().filter(|e| e["type"] == "question");
        events.map(|e| (e["question_id"].as_str().unwrap().into(), e["text"].as_str().unwrap().into())).collect()
    };
    let mut asked = Vec::new();
    wait_until(LONG, "every question to be asked", || {
        asked = questions();
        asked.len() == ASKING_TASKS * PER_TASK
    });
    let mut posts: Vec<Vec<String>> = Vec::new();
    for (id, text) in &asked {
        posts.push(vec!["reply".into(), id.clone(), format!("answer to {text}")]);
    }
    for t in &reading {
        posts.extend((1..=PER_TASK).map(|i| vec!["send".into(), t.clone(), format!("message {i} to {t}")]));
    }
    for n in 0..SESSIONS * WAITS_PER_SESSION {
        posts.push(vec!["notify".into(), "--session".into(), format!("s{}", n % SESSIONS), format!("event {n}")]);
    }
    std::thread::scope(|s| {
        for share in posts.chunks(posts.len().div_ceil(4)) {
            let u = &u;
            s.spawn(move || {
                for p in share {
                    let args: Vec<&str> = p.iter().map(String::as_str).collect();
                    check(&args, u.cmd().args(&args).output().unwrap(), 0);
                }
            });
        }
    });

    // Every `wait` got one event of its session, and each event went to one of them.
    let mut got: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (n, (session, mut child)) in waits.into_iter().enumerate() {
        let code = child.wait().unwrap().code();
        let printed = fs::read_to_string(out.join(format!("wait.{n}"))).unwrap();
        assert_eq!(code, Some(0), "wait {n} printed {printed}");
        let e: Value = serde_json::from_str(printed.trim()).unwrap();
        assert_eq!(e["session"], format!("s{session}"), "{e}");
        got.entry(session).or_default().push(e["text"].as_str().unwrap().to_owned());
    }
    for (session, mut texts) in got {
        texts.sort();
        let mut posted: Vec<String> = (0..SESSIONS * WAITS_PER_SESSION)
            .filter(|n| n % SESSIONS == session)
            .map(|n| format!("event {n}"))
            .collect();
        posted.sort();
        assert_eq!(texts, posted, "session s{session}");
    }
    // Every question got its own answer; every message was read by one process of its task.
    let mut running: Vec<(&String, usize)> =
        asking.iter().chain(&reading).flat_map(|t| (1..=PER_TASK).map(move |i| (t, i))).collect();
    wait_until(LONG, "every task's waiters to end", || {
        running.retain(|(t, i)| task_output(&out, t, *i).1 < 0);
        running.is_empty()
    });
    for t in &asking {
        for i in 1..=PER_TASK {
            assert_eq!(task_output(&out, t, i), (format!("answer to {t} {i}"), 0), "task {t}'s ask-lead {i}");
        }
    }
    for t in &reading {
        let read: BTreeSet<(String, i32)> = (1..=PER_TASK).map(|i| task_output(&out, t, i)).collect();
        let sent: BTreeSet<(String, i32)> = (1..=PER_TASK).map(|i| (format!("message {i} to {t}"), 0)).collect();
        assert_eq!(read, sent, "task {t}'s inbox");
    }
    // And the store counts each delivered once, none left.
    let events = u.run(&["--json", "events"]);
    let undelivered: Vec<&Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "message" && e["consumed"] != true)
        .collect();
    assert!(undelivered.is_empty(), "{undelivered:?}");
    eprintln!("all answered after {:?}", started.elapsed());
}
