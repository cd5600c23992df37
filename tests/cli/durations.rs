//! Every duration the CLI takes is range-checked: a huge one is refused (exit 2), never a panic
//! or a wrap to a tiny value.

use crate::common::{Home, fake_agent};

#[test]
fn out_of_range_durations_are_refused_not_wrapped() {
    let h = Home::new();
    let token = h.start(&["sleep", "60"]);
    let fake = fake_agent();
    let huge = "10000000000000000000";
    // 18446744073709552 s is u64::MAX ms and a bit: it used to wrap to 384 ms.
    let wraps = "18446744073709552";
    for args in [
        vec!["await", &token, "--timeout", huge],
        vec!["halt", &token, "--grace", huge],
        vec!["halt", "abcdef", "--grace", huge],
        vec!["run", "--wait", huge, "--", &fake, "sleep", "0"],
        vec!["run", "--timeout", wraps, "--", &fake, "sleep", "0"],
        vec!["ask", "reviewer", "hi", "--timeout", "1e400"],
        vec!["wait", "--timeout", huge],
        vec!["prune", "--older-than", huge],
    ] {
        let r = h.run(&args, 2);
        assert!(r.stderr.contains("too long") || r.stderr.contains("invalid duration"), "{args:?}: {}", r.stderr);
    }
    // Nothing was started by the refused runs, and the running task was not touched.
    let listed = h.run(&["--json", "list"], 0).json();
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(h.status(&token)["status"], "running");
    h.run(&["halt", &token, "--grace", "0.1s"], 0);
}
