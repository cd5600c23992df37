//! Rate-limited runs run again under the same token (`retry_on`, `max_retries`, `backoff`).

use std::time::{Duration, Instant};

use crate::common::{Home, fake_agent, wait_until};

/// A home whose role `limited` runs `fake-agent limited COUNTER N CODE` with `settings`.
fn limited(h: &Home, runs_needed: u32, code: i32, settings: &str) -> String {
    let counter = h.path().join("runs");
    let toml = format!(
        "[agents.limited]\ncommand = [\"{}\", \"limited\", \"{}\", \"{runs_needed}\", \"{code}\"]\n{settings}\n",
        fake_agent(),
        counter.display()
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    counter.to_str().unwrap().to_owned()
}

fn runs(counter: &str) -> u32 {
    std::fs::read_to_string(counter).map_or(0, |s| s.trim().parse().unwrap())
}

#[test]
fn a_run_that_exits_with_a_rate_limit_code_runs_again_under_the_same_token() {
    let h = Home::new();
    let counter = limited(&h, 3, 75, "retry_on = { exit = [75] }\nbackoff = \"200ms\"");
    let t0 = Instant::now();
    let v = h.run(&["--json", "ask", "--sync", "limited", "go"], 0).json();
    // Back-offs of 200 ms, then 400 ms.
    assert!(t0.elapsed() >= Duration::from_millis(600), "{:?}", t0.elapsed());
    assert_eq!((v["status"].as_str(), v["attempts"].as_u64()), (Some("completed"), Some(3)), "{v}");
    assert_eq!(v["summary"], "answered on run 3");
    let note = v["note"].as_str().unwrap();
    assert!(note.contains("run 1 was rate-limited (exit 75)") && note.contains("run 2 was"), "{note}");
    assert_eq!(runs(&counter), 3);
    assert_eq!(h.run(&["--json", "list"], 0).json()["count"], 1, "one token for all three runs");
    let text = h.run(&["status", v["token"].as_str().unwrap()], 0).stdout;
    assert!(text.contains("after 3 runs"), "{text}");
}

#[test]
fn a_rate_limit_text_in_the_output_counts_too_and_retries_run_out() {
    let h = Home::new();
    let counter =
        limited(&h, 5, 1, "retry_on = { output = [\"rate_limit_error\"] }\nmax_retries = 2\nbackoff = \"100ms\"");
    let v = h.run(&["--json", "ask", "--sync", "limited", "go"], 1).json();
    assert_eq!(
        (v["status"].as_str(), v["exit_code"].as_i64(), v["attempts"].as_u64()),
        (Some("failed"), Some(1), Some(3))
    );
    assert_eq!(runs(&counter), 3, "two retries, then the end");
    // The summary is the last run's whole output, not the runs before it.
    assert_eq!(v["summary"], "run 3\nrate_limit_error: slow down", "{v}");
    // An exit code alone that is not listed is an ordinary failure.
    let h = Home::new();
    let counter = limited(&h, 5, 1, "retry_on = { exit = [75] }\nbackoff = \"100ms\"");
    let v = h.run(&["--json", "ask", "--sync", "limited", "go"], 1).json();
    assert_eq!((v["status"].as_str(), v["attempts"].as_u64()), (Some("failed"), Some(1)), "{v}");
    assert_eq!(runs(&counter), 1);
}

#[test]
fn halting_a_task_during_its_back_off_ends_it_without_another_run() {
    let h = Home::new();
    let counter = limited(&h, 3, 75, "retry_on = { exit = [75] }\nbackoff = \"1h\"");
    let token = h.run(&["--json", "ask", "--async", "limited", "go"], 0).json()["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "the back-off to begin", || {
        h.status(&token)["summary"].as_str().is_some_and(|s| s.starts_with("rate-limited: run 2 starts in"))
    });
    let v = h.run_within(Duration::from_secs(30), &["--json", "halt", &token], 0).json();
    assert_eq!((v["status"].as_str(), v["attempts"].as_u64()), (Some("cancelled"), Some(1)), "{v}");
    assert_eq!(runs(&counter), 1);
}

#[test]
fn retry_settings_that_mean_nothing_are_refused_before_anything_runs() {
    let h = Home::new();
    for settings in [
        "max_retries = 2",
        "retry_on = {}",
        "retry_on = { output = [\"\"] }",
        "retry_on = { exit = [1] }\nbackoff = \"soon\"",
    ] {
        let counter = limited(&h, 1, 75, settings);
        let err = h.run(&["ask", "limited", "go"], 2).stderr;
        assert!(err.contains("role `limited`") && err.contains("agents.toml"), "{settings}: {err}");
        assert_eq!(runs(&counter), 0, "{settings}");
    }
    assert!(!h.path().join("subagents").exists(), "no task was created");
}

/// A home whose role `script` runs `sh -c SCRIPT COUNTER` with `settings`; `$n` in the script
/// is the run's number.
fn scripted(h: &Home, script: &str, settings: &str) -> String {
    let counter = h.path().join("runs");
    let script = format!("n=$(($(cat \"$0\" 2>/dev/null || echo 0) + 1)); echo $n > \"$0\"; {script}");
    let toml = format!(
        "[agents.script]\ncommand = [\"sh\", \"-c\", {}, \"{}\"]\n{settings}\n",
        serde_json::to_string(&script).unwrap(),
        counter.display()
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    counter.to_str().unwrap().to_owned()
}

#[test]
fn each_run_starts_on_a_line_of_its_own_and_only_the_last_one_answers() {
    let h = Home::new();
    // Run 1 answers half and stops mid-line, rate-limited; run 2 answers without a marker.
    let script = "if [ $n = 1 ]; then printf '> half an answer'; exit 75; fi; echo 'the whole answer'";
    scripted(&h, script, "retry_on = { exit = [75] }\nbackoff = \"100ms\"");
    let v = h.run(&["--json", "ask", "--sync", "script", "go"], 0).json();
    assert_eq!((v["summary"].as_str(), v["attempts"].as_u64()), (Some("the whole answer"), Some(2)), "{v}");
    assert_eq!(v["line_count"], 2);
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert_eq!(log, "> half an answer\nthe whole answer\n");
}

#[test]
fn a_run_that_succeeds_is_the_answer_whatever_its_output_says() {
    let h = Home::new();
    let counter =
        scripted(&h, "echo '> about the rate_limit_error you saw'", "retry_on = { output = [\"rate_limit_error\"] }");
    let v = h.run(&["--json", "ask", "--sync", "script", "go"], 0).json();
    assert_eq!((v["status"].as_str(), v["attempts"].as_u64()), (Some("completed"), Some(1)), "{v}");
    assert_eq!(runs(&counter), 1);
}

#[test]
fn a_deadline_during_the_back_off_ends_the_task_and_both_are_noted() {
    let h = Home::new();
    let counter = limited(&h, 3, 75, "retry_on = { exit = [75] }\nbackoff = \"1h\"");
    let v = h
        .run_within(Duration::from_secs(60), &["--json", "ask", "--sync", "--timeout", "1s", "limited", "go"], 1)
        .json();
    assert_eq!(v["status"], "expired", "{v}");
    let note = v["note"].as_str().unwrap();
    assert!(note.contains("run 1 was rate-limited (exit 75)") && note.contains("deadline passed"), "{note}");
    assert_eq!(runs(&counter), 1);
}

#[test]
fn what_a_rate_limited_run_left_running_is_ended_with_sigterm_before_the_next_run() {
    let h = Home::new();
    let term = h.path().join("term");
    let script = format!(
        "if [ $n = 1 ]; then setsid sh -c 'trap \"echo got TERM > {}; exit 0\" TERM; while :; do sleep 0.1; done' & \
         sleep 0.2; exit 75; fi; echo '> done'",
        term.display()
    );
    scripted(&h, &script, "retry_on = { exit = [75] }\nbackoff = \"100ms\"");
    let v = h.run(&["--json", "ask", "--sync", "script", "go"], 0).json();
    assert_eq!((v["summary"].as_str(), v["attempts"].as_u64()), (Some("done"), Some(2)), "{v}");
    assert_eq!(std::fs::read_to_string(&term).unwrap(), "got TERM\n");
    let note = v["note"].as_str().unwrap();
    // The shell, and its `sleep` unless it was between two.
    assert!(
        note.contains("run 1 was rate-limited (exit 75) and left ") && note.contains(" process(es) running, ended"),
        "{note}"
    );
}

#[test]
fn a_deadline_holds_while_a_retried_task_waits_for_its_place_and_no_run_follows_it() {
    let h = Home::new();
    let go = h.path().join("go");
    // Each run waits for the go, then is rate-limited.
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done; exit 75", go.display());
    let settings = "retry_on = { exit = [75] }\nbackoff = \"1s\"\ntimeout = \"4s\"\npool = \"one\"\n\
                    [pools.one]\nparallel = 1\n[agents.blocker]\ncommand = [\"sleep\", \"600\"]\npool = \"one\"";
    let counter = scripted(&h, &script, settings);
    let token = |v: serde_json::Value| v["token"].as_str().unwrap().to_owned();
    let task = token(h.run(&["--json", "ask", "--async", "script", "go"], 0).json());
    // The blocker waits behind run 1, and takes the place run 1 gives up for its back-off.
    let blocker = token(h.run(&["--json", "ask", "--async", "blocker", "x"], 0).json());
    let v = h.status(&blocker);
    assert_eq!(v["status"], "queued", "{v}");
    std::fs::write(&go, "").unwrap();
    let v = h.run_within(Duration::from_secs(60), &["--json", "await", &task, "--timeout", "30s"], 1).json();
    assert_eq!((v["status"].as_str(), v["attempts"].as_u64()), (Some("expired"), Some(1)), "{v}");
    let note = v["note"].as_str().unwrap();
    assert!(note.contains("deadline passed while it waited for a place"), "{note}");
    // At its deadline: not before, and not when the place came free (never, here).
    let elapsed = v["elapsed_ms"].as_u64().unwrap();
    assert!((4000..20_000).contains(&elapsed), "ended after {elapsed} ms");
    assert_eq!(h.status(&blocker)["status"], "running");
    assert_eq!(runs(&counter), 1);
    h.run(&["halt", &blocker, "--grace", "0.2s"], 0);
    assert_eq!(runs(&counter), 1, "no run after the deadline");
}
