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
