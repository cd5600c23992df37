//! A worker asks its lead (`ask-lead`), the lead answers (`reply`), the worker goes on; the
//! lead sends a running worker a message (`send`), the worker reads it (`inbox`).

use std::time::Duration;

use crate::common::{Home, wait_until};

/// A worker that asks `question` (with `flags`) and answers "> chose ANSWER", or "> no answer
/// RC" when ask-lead failed. It gives up after two minutes unless told otherwise, so that a
/// test that fails before it replies leaves nothing running.
fn asker(question: &str, flags: &str) -> String {
    let flags = if flags.contains("--timeout") { flags.to_owned() } else { format!("{flags} --timeout 120s") };
    format!(
        "a=$(agentctl ask-lead '{question}' {flags}); rc=$?; [ $rc -eq 0 ] && echo \"> chose $a\" || echo \"> no answer $rc\""
    )
}

#[test]
fn a_worker_asks_the_lead_answers_and_the_worker_goes_on() {
    let h = Home::new();
    let token = h.start_script(&asker("which branch?", "--choices main,dev"));
    // The lead's await returns with the question, the task still running (exit 3).
    let a = h.run(&["--json", "await", &token, "--timeout", "30s"], 3).json();
    assert_eq!(a["status"], "running", "{a}");
    let q = &a["pending_question"];
    assert_eq!((q["text"].as_str(), q["choices"].clone()), (Some("which branch?"), serde_json::json!(["main", "dev"])));
    let id = q["id"].as_str().unwrap().to_owned();
    // status and list show it; the text output says how to answer.
    assert_eq!(h.status(&token)["pending_question"]["id"], id.as_str());
    let listed = h.run(&["list"], 0).stdout;
    assert!(listed.contains(&format!("ASKS ({id}): which branch?")), "{listed}");
    let text = h.run(&["await", &token, "--timeout", "30s"], 3).stdout;
    assert!(text.contains(&format!("reply {token} ANSWER")), "{text}");

    h.run(&["reply", &token, "dev"], 0);
    let done = h.run(&["--json", "await", &token, "--timeout", "30s"], 0).json();
    assert_eq!((done["status"].as_str(), done["summary"].as_str()), (Some("completed"), Some("chose dev")), "{done}");
    assert!(done.get("pending_question").is_none(), "{done}");

    // Answering again, or a task with nothing pending, or nothing at all: clear refusals.
    let again = h.run(&["reply", &id, "main"], 2);
    assert!(again.stderr.contains("answered already"), "{}", again.stderr);
    let none = h.run(&["reply", &token, "main"], 2);
    assert!(none.stderr.contains("no question waiting"), "{}", none.stderr);
    let unknown = h.run(&["reply", "q0000000000", "x"], 2);
    assert!(unknown.stderr.contains("no question q0000000000"), "{}", unknown.stderr);
    // The question went to the lead's session as an event with its id (and `wait` shows both).
    let shown = h.run(&["events"], 0).stdout;
    assert!(shown.contains(&format!("question {id} from {token} (run): which branch? [main, dev]")), "{shown}");
    let events = h.run(&["--json", "events"], 0).json();
    let asked = events["events"].as_array().unwrap().iter().find(|e| e["type"] == "question").unwrap().clone();
    assert_eq!((asked["question_id"].as_str(), asked["token"].as_str()), (Some(id.as_str()), Some(token.as_str())));
}

#[test]
fn a_worker_reaches_the_agentctl_that_started_it_though_it_is_not_on_path() {
    let h = Home::new();
    // As an MCP client's config or `cargo run` starts it: by its path, its directory not on PATH.
    let started_by_path = |args: &[&str]| {
        let out = h.cmd().env("PATH", "/usr/bin:/bin").args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let script = "agentctl --version && a=$(agentctl ask-lead 'go on?' --timeout 120s) && echo \"> lead said $a\"";
    let (code, out, err) = started_by_path(&["--json", "run", "--async", "--", "sh", "-c", script]);
    assert_eq!(code, Some(0), "{err}");
    let token = serde_json::from_str::<serde_json::Value>(&out).unwrap()["token"].as_str().unwrap().to_owned();
    let asked = h.run(&["--json", "await", &token, "--timeout", "30s"], 3).json();
    assert_eq!(asked["pending_question"]["text"], "go on?", "{asked}");
    h.run(&["reply", &token, "yes"], 0);
    let done = h.run(&["--json", "await", &token, "--timeout", "30s"], 0).json();
    assert_eq!(done["summary"], "lead said yes", "{done}");
    // Where PATH finds this agentctl already, PATH is left as it was.
    let v = h.run(&["--json", "run", "--", "sh", "-c", "echo \"> $PATH\""], 0).json();
    assert!(!v["summary"].as_str().unwrap().contains(h.path().to_str().unwrap()), "{v}");
}

#[test]
fn a_question_with_escape_sequences_never_reaches_the_terminal_raw() {
    let h = Home::new();
    // Sets the window title, then clears the screen: shown, not obeyed.
    let script = "q=$(printf 'title\\033]0;pwned\\007 clear\\033[2J\\rend'); \
                  a=$(agentctl ask-lead \"$q\" --choices \"$(printf 'x\\033[31m')\" --timeout 120s); \
                  printf '> got %s\\033[2J\\n' \"$a\"";
    // The waiting `run` returns with the question (exit 3).
    let waited = h.run(&["run", "--", "sh", "-c", script], 3).stdout;
    let token = waited.split_whitespace().nth(1).unwrap().to_owned();
    for out in [waited, h.run(&["await", &token, "--timeout", "30s"], 3).stdout, h.run(&["status", &token], 3).stdout] {
        assert!(out.contains("asks (") && out.contains("title^[]0;pwned^G clear^[[2J^Mend [x^[[31m]"), "{out:?}");
        assert!(!out.contains('\x1b') && !out.contains('\x07') && !out.contains('\r'), "{out:?}");
    }
    let event = h.run(&["wait", "--types", "question", "--timeout", "30s"], 0).stdout;
    assert!(event.contains("title^[]0;pwned^G") && !event.contains('\x1b'), "{event:?}");
    let shown = h.run(&["events"], 0).stdout;
    assert!(!shown.contains('\x1b') && !shown.contains('\r'), "{shown:?}");
    // Its JSON keeps the text as it was (escaped by JSON itself).
    let v = h.run(&["--json", "status", &token], 3).json();
    assert!(v["pending_question"]["text"].as_str().unwrap().contains("\x1b]0;pwned\x07"), "{v}");
    h.run(&["reply", &token, "x\x1b[31m"], 0);
    let done = h.run(&["await", &token, "--timeout", "30s"], 0).stdout;
    assert!(done.contains("got x") && !done.contains('\x1b'), "{done:?}");
}

#[test]
fn workers_asking_at_once_each_get_their_own_answer_and_a_withdrawn_question_is_refused() {
    let h = Home::new();
    let tokens: Vec<String> = (0..3).map(|i| h.start_script(&asker(&format!("question {i}"), ""))).collect();
    for t in &tokens {
        let a = h.run(&["--json", "await", t, "--timeout", "30s"], 3).json();
        let id = a["pending_question"]["id"].as_str().unwrap().to_owned();
        h.run(&["reply", &id, &format!("answer for {t}")], 0);
    }
    for t in &tokens {
        let done = h.run(&["--json", "await", t, "--timeout", "30s"], 0).json();
        assert_eq!(done["summary"], format!("chose answer for {t}"), "{done}");
    }
    // Nobody answers in time: ask-lead exits 124 and the question is withdrawn.
    let late = h.start_script(&asker("anyone?", "--timeout 1s"));
    let a = h.run(&["--json", "await", &late, "--timeout", "30s"], 3).json();
    let id = a["pending_question"]["id"].as_str().unwrap().to_owned();
    // While it asks, await returns at once; once withdrawn, it waits for the end.
    wait_until(Duration::from_secs(30), "the question to be withdrawn", || {
        h.status(&late).get("pending_question").is_none()
    });
    let done = h.run(&["--json", "await", &late, "--timeout", "30s"], 0).json();
    assert_eq!(done["summary"], "no answer 124", "{done}");
    let r = h.run(&["reply", &id, "too late"], 2);
    assert!(r.stderr.contains("withdrawn"), "{}", r.stderr);
}

#[test]
fn a_message_sent_to_a_waiting_worker_is_read_once() {
    let h = Home::new();
    let script = "m=$(agentctl inbox --wait 30s); agentctl inbox > /dev/null; echo \"> got $m, then $?\"";
    let token = h.start_script(script);
    let sent = h.run(&["--json", "send", &token, "hello worker"], 0).json();
    let inbox = format!("inbox-{token}");
    assert_eq!((sent["type"].as_str(), sent["session"].as_str()), (Some("message"), Some(inbox.as_str())), "{sent}");
    // A command takes no input as it runs: the message went to its inbox, as the answer says.
    assert_eq!(sent["to"], "inbox", "{sent}");
    let done = h.run(&["--json", "await", &token, "--timeout", "30s"], 0).json();
    assert_eq!(done["summary"], "got hello worker, then 124", "{done}");
    let r = h.run(&["send", &token, "too late"], 2);
    assert!(r.stderr.contains("already ended"), "{}", r.stderr);
    // Outside a task there is no inbox to read.
    let r = h.run(&["inbox"], 2);
    assert!(r.stderr.contains("inside a task"), "{}", r.stderr);
}

#[test]
fn halting_a_task_that_asks_withdraws_its_question_and_ask_lead_never_hangs() {
    let h = Home::new();
    let token = h.start_script(&asker("may I?", ""));
    let a = h.run(&["--json", "await", &token, "--timeout", "30s"], 3).json();
    let id = a["pending_question"]["id"].as_str().unwrap().to_owned();
    h.run(&["halt", &token, "--grace", "1s"], 0);
    let r = h.run(&["reply", &id, "yes"], 2);
    assert!(r.stderr.contains("withdrawn"), "{}", r.stderr);
    // A process of the halted task that asks is refused at once.
    let out = h.cmd().env("AGENTCTL_TOKEN", &token).args(["ask-lead", "still there?"]).output().unwrap();
    let r = crate::common::check(&["ask-lead"], out, 2);
    assert!(r.stderr.contains("already ended"), "{}", r.stderr);
}

#[test]
fn a_killed_ask_lead_withdraws_its_question_and_follow_waits_for_the_end() {
    let h = Home::new();
    // After its ask-lead, the worker goes on running: it waits in its inbox.
    let script = "agentctl ask-lead 'still there?' --timeout 120s; rc=$?; m=$(agentctl inbox --wait 30s); echo \"> no answer $rc, then $m\"";
    let token = h.start_script(script);
    // `logs --follow` streams to the end: a question does not stop it.
    let follow = h.cmd().args(["logs", &token, "--follow"]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let a = h.run(&["--json", "await", &token, "--timeout", "30s"], 3).json();
    let id = a["pending_question"]["id"].as_str().unwrap().to_owned();
    // The worker's ask-lead is killed (an agent's tool timeout, say): the question is withdrawn
    // while the task runs on, not left pending for ever.
    let asker: String = h.db().query_row("SELECT asker FROM questions WHERE id = ?1", [&id], |r| r.get(0)).unwrap();
    let pid: i32 = asker.split(' ').next().unwrap().parse().unwrap();
    // SAFETY: a plain kill of the ask-lead process this test's task started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    wait_until(Duration::from_secs(30), "the ask-lead to be gone", || !crate::common::alive(i64::from(pid)));
    let s = h.status(&token);
    assert_eq!(s["status"], "running", "{s}");
    assert!(s.get("pending_question").is_none(), "{s}");
    let r = h.run(&["reply", &id, "yes"], 2);
    assert!(r.stderr.contains("withdrawn"), "{}", r.stderr);
    h.run(&["send", &token, "bye"], 0);
    let done = h.run(&["--json", "await", &token, "--timeout", "30s"], 0).json();
    assert_eq!(done["summary"], "no answer 137, then bye", "{done}");
    let out = follow.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no answer 137, then bye"));
}
