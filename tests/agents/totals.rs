//! `agentctl usage --by role` (and the MCP `usage` tool) over 20 tasks of three real CLIs,
//! claude, codex and gemini, run at once against two scripts: its totals are exactly the sums
//! of the tasks' own `status --json` figures (costs in billionths of a dollar, each task's
//! rounded to one, as the command sums them).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::clis::{self, Cli};
use crate::common::{Home, check};
use crate::fake_api::FakeApi;
use crate::raw_mcp::RawMcp;
use crate::usage::PRICES;

const FIGURES: [&str; 5] = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "turns"];

/// The CLI of kind `i % 3` against `api`, each in a HOME and directory of its own.
fn cli(i: usize, api: &FakeApi) -> (Cli, &'static str) {
    match i % 3 {
        0 => (clis::claude(api), "by-claude"),
        1 => {
            let mut cli = clis::codex(api);
            // Codex's stream names no model: its price is found by the command's.
            cli.argv.splice(2..2, ["-m".to_owned(), "gpt-5.5".to_owned()]);
            (cli, "by-codex")
        }
        _ => (clis::gemini(api), "by-gemini"),
    }
}

/// Each role's totals (and `total`'s) summed from its tasks' own figures, in `usage --json`'s
/// fields: tasks, unknown, running, each figure some task reported, the cost in billionths.
fn summed(home: &Home, tasks: &[(String, &str)]) -> BTreeMap<String, Value> {
    let mut groups: BTreeMap<String, serde_json::Map<String, Value>> = BTreeMap::new();
    for (token, role) in tasks {
        let s = home.status(token);
        assert_eq!(s["status"], "completed", "{s}");
        let u = &s["usage"];
        let mut own = vec![("tasks", 1), ("unknown", u64::from(u.is_null())), ("running", 0)];
        own.extend(FIGURES.into_iter().filter_map(|k| Some((k, u[k].as_u64()?))));
        own.extend(u["cost_usd"].as_f64().map(|c| ("cost_nano_usd", (c * 1e9).round() as u64)));
        for group in [role.to_string(), "total".to_owned()] {
            let g = groups.entry(group).or_default();
            for (k, n) in &own {
                let was = g.get(*k).and_then(Value::as_u64).unwrap_or(0);
                g.insert((*k).to_owned(), Value::from(was + n));
            }
            if u["cost_estimated"] == true {
                g.insert("cost_estimated".into(), Value::Bool(true));
            }
        }
    }
    groups.into_iter().map(|(g, t)| (g, Value::Object(t))).collect()
}

/// What `usage --json` (or the tool) says of each group and the total, in `summed`'s fields.
fn reported(v: &Value) -> BTreeMap<String, Value> {
    let keep = |s: &Value| {
        let mut o = s.as_object().unwrap_or_else(|| panic!("no totals: {v}")).clone();
        o.retain(|k, _| !["group", "cost_usd", "cost_unknown"].contains(&k.as_str()));
        Value::Object(o)
    };
    let groups = v["groups"].as_array().unwrap_or_else(|| panic!("no groups: {v}"));
    let mut out: BTreeMap<String, Value> =
        groups.iter().map(|g| (g["group"].as_str().unwrap().to_owned(), keep(g))).collect();
    out.insert("total".into(), keep(&v["total"]));
    out
}

#[test]
fn usage_by_role_over_twenty_real_cli_tasks_adds_up_to_their_own_figures() {
    // One call, or the three of streams.json: the tasks do not all spend the same.
    let apis = [FakeApi::start("answer.json"), FakeApi::start("streams.json")];
    let home = Home::new();
    std::fs::write(home.path().join("agents.toml"), PRICES).unwrap();
    let mut clis = Vec::new();
    let mut tasks: Vec<(String, &str)> = Vec::new();
    // All at once: the suite's time is the slowest task's, not their sum.
    for i in 0..20 {
        let (cli, role) = cli(i, &apis[usize::from(i % 4 == 3)]);
        let mut args = vec!["--json", "run", "--async", "--timeout", "5m", "--role", role, "--"];
        args.extend(cli.argv.iter().map(String::as_str));
        let v = check(&args, cli.agentctl(&home, &args).output().unwrap(), 0).json();
        tasks.push((v["token"].as_str().unwrap().to_owned(), role));
        clis.push(cli);
    }
    for (token, _) in &tasks {
        let v = home.run(&["--json", "await", "--timeout", "5m", token], 0).json();
        assert_eq!(
            v["status"],
            "completed",
            "{v}\nlog:\n{}",
            std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap_or_default()
        );
    }

    let want = summed(&home, &tasks);
    let by_role = home.run(&["--json", "usage", "--by", "role"], 0).json();
    assert_eq!(reported(&by_role), want, "{by_role:#}");
    // Every task reported its tokens and a cost, its own (claude) or priced (codex, gemini).
    assert_eq!((want["total"]["tasks"].as_u64(), want["total"]["unknown"].as_u64()), (Some(20), Some(0)), "{want:?}");
    let total = &by_role["total"];
    assert_eq!(total["cost_usd"].as_f64(), Some(total["cost_nano_usd"].as_u64().unwrap() as f64 / 1e9), "{total}");
    assert!(total.get("cost_unknown").is_none(), "{total}");

    let by_agent = home.run(&["--json", "usage", "--by", "agent"], 0).json();
    let mut kinds: Vec<(&str, u64)> = by_agent["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["group"].as_str().unwrap(), g["tasks"].as_u64().unwrap()))
        .collect();
    kinds.sort();
    assert_eq!(kinds, [("claude", 7), ("codex", 7), ("gemini", 6)], "{by_agent}");
    assert_eq!(by_agent["total"], by_role["total"], "{by_agent}");

    let mut mcp = RawMcp::start(&home, &[]);
    let r = mcp.call("usage", json!({"by": "role"}));
    assert_eq!(reported(&r["structuredContent"]), want, "{r:#}");
    assert_eq!(mcp.close(), Some(0));
}
