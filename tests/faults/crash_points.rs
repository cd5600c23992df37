//! SIGKILL at each named point of a task's start and end (`AGENTCTL_CRASH_AT`, see
//! `agentctl::crash`), 200 times each: afterwards every task is `completed`, or `lost` with a
//! note saying why, none is left `starting` or `running`, every token handed back names a task,
//! nothing waits in `starting/`, and the store is whole.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use crate::common::{Home, wait_until};

const TIMES: usize = 200;

#[test]
fn a_task_killed_at_any_point_of_its_start_or_end_is_never_lost_without_a_note() {
    let h = Home::new();
    let mut handed = Vec::new();
    for point in agentctl::crash::POINTS {
        for _ in 0..TIMES {
            let out =
                h.cmd().env("AGENTCTL_CRASH_AT", point).args(["run", "-q", "--async", "--", "true"]).output().unwrap();
            match out.status.signal() {
                // Only a launcher's own points kill the launcher: no token, and no task it
                // handed back to anyone.
                Some(libc::SIGKILL) => assert!(point.starts_with("launch."), "{point}: the launcher was killed"),
                _ => {
                    assert!(out.status.success(), "{point}: {out:?}");
                    handed.push((point, String::from_utf8(out.stdout).unwrap().trim().to_owned()));
                }
            }
        }
    }
    wait_until(Duration::from_secs(300), "every task to end", || h.all_ended());
    let listed = h.run(&["--json", "list", "--limit", "100000"], 0).json();
    let tasks = listed["tasks"].as_array().unwrap();
    for t in tasks {
        match t["status"].as_str().unwrap() {
            "completed" => {}
            "lost" => assert!(t["note"].as_str().is_some_and(|n| n.contains("supervisor died")), "{t}"),
            other => panic!("a task left {other}: {t}"),
        }
    }
    for (point, token) in &handed {
        let v = h.status(token);
        assert!(matches!(v["status"].as_str(), Some("completed" | "lost")), "{point}: {token} is {v}");
    }
    // The supervisor's own points: every task it died in is lost; the end's, lost or (recorded
    // before it died) completed.
    let lost = |point: &str| handed.iter().filter(|(p, t)| *p == point && h.status(t)["status"] == "lost").count();
    for point in ["supervisor.begun", "supervisor.settled", "supervisor.spawned", "end.summary"] {
        assert_eq!(lost(point), TIMES, "{point}");
    }
    assert_eq!(lost("end.recorded") + lost("end.cleaned"), 0);
    let starting = std::fs::read_dir(h.path().join("starting")).map_or(0, |d| d.count());
    assert_eq!(starting, 0, "tasks left in starting/");
    let check: String = h.db().query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
}
