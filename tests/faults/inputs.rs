//! 11. Hostile tokens, roles, session names and paths are refused before any file is touched.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::common::{Home, alive, fake_agent, wait_until};
use crate::raw_mcp::RawMcp;

fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.display().to_string());
            if p.is_dir() {
                out.extend(tree(&p));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn hostile_names_are_refused_and_touch_nothing() {
    let h = Home::new();
    let token =
        h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0"], 0).json()["token"].as_str().unwrap().to_owned();
    // `run` answers once the record is final; the supervisor then removes its socket and exits.
    let sup = h.record(&token)["started"]["supervisor_pid"].as_i64().unwrap();
    wait_until(Duration::from_secs(20), "the supervisor to exit", || !alive(sup));
    let before = tree(h.path());
    let long = "a".repeat(10_000);
    let hostile = ["..", "../x", "a/b", "/etc/passwd", "ab\u{301}cdé", "Ａ3f2c1", &long, "", " ", "a\tb", "..\\x"];
    for bad in hostile {
        for args in [
            vec!["status", bad],
            vec!["await", bad, "--timeout", "0.1s"],
            vec!["halt", bad],
            vec!["logs", bad],
            vec!["ask", bad, "question"],
            vec!["run", "--role", bad, "--", "true"],
            vec!["wait", "--session", bad, "--timeout", "0.1s"],
            vec!["notify", "--session", bad, "hello"],
            vec!["run", "--session", bad, "--", "true"],
            vec!["list", "--role", bad],
            vec!["events", "--session", bad],
        ] {
            let r = h.run(&args, 2);
            assert!(!r.stderr.is_empty(), "{args:?} gave no reason");
        }
    }
    // NUL cannot travel in argv; through MCP it can.
    let mut mcp = RawMcp::start(&h, &["--allow-run"]);
    for (tool, args) in [
        ("await", json!({"token": "ab\0cd"})),
        ("ask", json!({"role": "rev\0iewer", "question": "q"})),
        ("ask", json!({"role": "reviewer", "question": "q\0q"})),
        ("run", json!({"command": ["tr\0ue"]})),
        ("wait_for_event", json!({"session": "s\0", "timeout_secs": 0.1})),
        ("logs", json!({"token": "../../etc/passwd"})),
    ] {
        let r = mcp.call(tool, args);
        assert_eq!(r["isError"], true, "{tool}: {r}");
    }
    let _ = mcp.server.kill();
    let _ = mcp.server.wait();
    let r = h.run(&["run", "--cwd", "../../no/such/dir", "--", "true"], 2);
    assert!(r.stderr.contains("does not exist"), "{}", r.stderr);
    let after = tree(h.path());
    let added: Vec<_> = after.iter().filter(|p| !before.contains(p)).collect();
    let removed: Vec<_> = before.iter().filter(|p| !after.contains(p)).collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "a refused command changed the home: added {added:?}, removed {removed:?}"
    );
}
