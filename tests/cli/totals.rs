//! `agentctl usage`: totals over a window, per group, that add up exactly to the tasks' own
//! figures.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Home, fixtures, wait_until};

const FIGURES: [&str; 5] = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "turns"];

/// Group totals summed from each task's own `status --json`: tasks, unknown, running, each
/// figure (absent when no task reported it), the cost in billionths of a dollar and whether
/// any of it is estimated.
fn summed(h: &Home, tokens: &[(String, &str)]) -> BTreeMap<String, Value> {
    let mut groups: BTreeMap<String, BTreeMap<&str, Value>> = BTreeMap::new();
    for (token, group) in tokens {
        let s = h.status(token);
        let u = &s["usage"];
        for g in [group.to_string(), "total".to_owned()] {
            let t = groups.entry(g).or_default();
            let add = |t: &mut BTreeMap<&str, Value>, k: &'static str, n: u64| {
                let was = t.get(k).and_then(Value::as_u64).unwrap_or(0);
                t.insert(k, Value::from(was + n));
            };
            add(t, "tasks", 1);
            add(t, "unknown", u64::from(u.is_null()));
            add(t, "running", u64::from(s["status"] == "running"));
            for k in FIGURES {
                if let Some(n) = u[k].as_u64() {
                    add(t, k, n);
                }
            }
            if let Some(c) = u["cost_usd"].as_f64() {
                add(t, "cost_nano_usd", (c * 1e9).round() as u64);
                if u["cost_estimated"] == true {
                    t.insert("cost_estimated", Value::Bool(true));
                }
            }
        }
    }
    groups
        .into_iter()
        .map(|(g, t)| (g, Value::Object(t.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())))
        .collect()
}

/// What `usage --json` says of each group, in the fields `summed` gives.
fn reported(v: &Value) -> BTreeMap<String, Value> {
    let keep = |s: &Value| {
        let mut o = s.as_object().unwrap().clone();
        o.retain(|k, _| k != "group" && k != "cost_usd" && k != "cost_unknown");
        Value::Object(o)
    };
    let mut out: BTreeMap<String, Value> =
        v["groups"].as_array().unwrap().iter().map(|g| (g["group"].as_str().unwrap().to_owned(), keep(g))).collect();
    out.insert("total".into(), keep(&v["total"]));
    out
}

#[test]
fn usage_by_role_adds_up_exactly_to_the_tasks_own_figures_running_ones_so_far() {
    let h = Home::new();
    let claude = fixtures().join("stream/claude").to_string_lossy().into_owned();
    let mut tasks: Vec<(String, &str)> = Vec::new();
    let mut run = |role: &'static str, args: &[&str], code| {
        let mut argv = vec!["--json", "run", "--sync", "--role", role, "--"];
        argv.extend(args);
        let v = h.run(&argv, code).json();
        tasks.push((v["token"].as_str().unwrap().to_owned(), role));
    };
    // Costs as Claude Code reports them, with more decimals than a float adds up exactly.
    for i in 0..8u64 {
        let (input, out, read, write, turns) = (1000 + i * 37, 50 + i, i * 11, 7 * i, 1 + i % 3);
        let usd = format!("0.{:010}", 123_456_789 * (i + 1) + i);
        let figures = [input, out, read, write, turns].map(|n| n.to_string());
        let mut args = vec![claude.as_str(), "figures"];
        args.extend(figures.iter().map(String::as_str));
        args.push(&usd);
        run("priced", &args, 0);
    }
    // No cost reported: agentctl's estimate, at list prices.
    for i in 0..6u64 {
        let figures = [300 + i, 40 + i * 3, 5, 9 * i, 2].map(|n| n.to_string());
        let mut args = vec![claude.as_str(), "figures"];
        args.extend(figures.iter().map(String::as_str));
        run("estimated", &args, 0);
    }
    // An agent that reports nothing: unknown, never zero.
    for i in 0..5 {
        run("plain", &["sh", "-c", &format!("echo {i}")], 0);
    }
    // One still running, counted with what it spent so far.
    let gate = h.path().join("gate");
    let v =
        h.run(&["--json", "run", "--async", "--role", "estimated", "--", &claude, "steps", gate.to_str().unwrap()], 0);
    let running = v.json()["token"].as_str().unwrap().to_owned();
    wait_until(Duration::from_secs(30), "the running task's step", || {
        h.status(&running)["step"]["what"] == "Bash: sleep 5"
    });
    tasks.push((running.clone(), "estimated"));
    assert_eq!(tasks.len(), 20);

    let want = summed(&h, &tasks);
    let by_role = h.run(&["--json", "usage", "--by", "role"], 0).json();
    assert_eq!(reported(&by_role), want, "{by_role:#}");
    assert_eq!(by_role["total"]["running"], 1);
    assert_eq!(by_role["groups"][0]["group"], "priced", "the costliest first: {by_role}");
    let plain = by_role["groups"].as_array().unwrap().iter().find(|g| g["group"] == "plain").unwrap();
    assert!(plain.get("cost_usd").is_none() && plain.get("input_tokens").is_none(), "{plain}");
    // The dollars are the billionths', exactly.
    let total = &by_role["total"];
    assert_eq!(total["cost_usd"].as_f64(), Some(total["cost_nano_usd"].as_u64().unwrap() as f64 / 1e9));

    // The same tasks by agent kind, and in a window that holds them all.
    let by_agent = h.run(&["--json", "usage", "--by", "agent", "--since", "1h"], 0).json();
    let kinds: Vec<(&str, u64)> = by_agent["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["group"].as_str().unwrap(), g["tasks"].as_u64().unwrap()))
        .collect();
    assert_eq!(kinds, [("claude", 15), ("generic", 5)], "{by_agent}");
    assert_eq!(by_agent["total"], by_role["total"]);
    assert!(by_agent["since_ms"].as_u64().is_some(), "{by_agent}");

    let text = h.run(&["usage", "--by", "role"], 0).stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("ROLE ") && lines[0].ends_with("COST"), "{text}");
    assert!(lines[1].starts_with("priced ") && lines[3].starts_with("plain "), "{text}");
    assert!(lines[3].ends_with(" -"), "{text}");
    assert_eq!(lines[4].split_whitespace().take(3).collect::<Vec<_>>(), ["total", "20", "5"], "{text}");
    assert!(text.contains("1 task(s) still running count with what they spent so far"), "{text}");

    // Once it ended, the running task counts with its final figures; a window before a task's
    // end leaves it out.
    std::fs::write(&gate, "").unwrap();
    h.run(&["await", &running], 0);
    let after = h.run(&["--json", "usage", "--by", "role"], 0).json();
    assert_eq!(reported(&after), summed(&h, &tasks), "{after:#}");
    assert_eq!(after["total"]["running"], 0);
    let none = h.run(&["--json", "usage", "--since", "0s"], 0).json();
    assert_eq!(none["total"]["tasks"], 0, "{none}");
    let r = h.run(&["usage", "--by", "model"], 2);
    assert!(r.stderr.contains("role, pool, session, agent"), "{}", r.stderr);
}
