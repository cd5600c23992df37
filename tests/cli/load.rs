//! Many tasks at once.

use std::process::Stdio;
use std::time::Duration;

use crate::common::{Home, fake_agent, wait_until};

#[test]
fn fifty_tasks_started_at_once_all_finish_and_are_listed() {
    let h = Home::new();
    let fake = fake_agent();
    let children: Vec<_> = (0..50)
        .map(|i| {
            let code = if i % 5 == 0 { "fail" } else { "sleep" };
            let arg = if i % 5 == 0 { "7".to_owned() } else { "0.3".to_owned() };
            h.cmd()
                .args(["--json", "run", "--async", "--", &fake, code, &arg])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut tokens = Vec::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // A task that fails at once may already be final when --async reads it back: exit 1.
        let want = if v["status"] == "failed" { 1 } else { 0 };
        assert_eq!(out.status.code(), Some(want), "{v} {}", String::from_utf8_lossy(&out.stderr));
        tokens.push(v["token"].as_str().unwrap().to_owned());
    }
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), 50, "tokens must be unique");
    wait_until(Duration::from_secs(60), "all 50 tasks to finish", || h.all_ended());
    let v = h.run(&["--json", "list"], 0).json();
    let tasks = v["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 50);
    let failed = tasks.iter().filter(|t| t["status"] == "failed" && t["exit_code"] == 7).count();
    let completed = tasks.iter().filter(|t| t["status"] == "completed").count();
    assert_eq!((failed, completed), (10, 40));
}
