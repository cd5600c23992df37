//! What agentctl reads of each real CLI's stream, against the three calls of `streams.json`
//! (STREAMS.md has their figures): `status --json` gives exactly the tokens the fake API
//! returned, the turns, and the cost, the CLI's own or estimated from `[prices]`; a run whose
//! output says nothing of what it spent has no usage at all, never zeros.

use serde_json::Value;

use crate::clis::{self, Cli};
use crate::common::Home;
use crate::fake_api::FakeApi;
use crate::fake_api::transcripts;
use crate::task::{Task, events, only, tokens};

/// The fake API's uncached input, output, cache-read and cache-write tokens over the script.
const SCRIPT: [Option<u64>; 4] = [Some(330), Some(60), Some(800), Some(200)];

#[test]
fn claude_reports_the_apis_exact_tokens_three_turns_and_its_own_cost() {
    let api = FakeApi::start("streams.json");
    let (task, _) = Task::run_sync(&clis::claude(&api), &[], 0);
    let s = task.status();
    assert_eq!(s["status"], "completed", "{s}");
    let u = &s["usage"];
    assert_eq!((tokens(u), u["turns"].as_u64()), (SCRIPT, Some(3)), "{s}");
    let log = events(&task.log(&s));
    let result = only(&log, "result");
    // The CLI's own total, not agentctl's estimate.
    assert_eq!(u["cost_usd"].as_f64(), result["total_cost_usd"].as_f64(), "{u}\n{result}");
    assert!(result["total_cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{result}");
    assert_eq!(u.get("cost_estimated"), None, "{u}");
    assert_eq!(u["session_id"], result["session_id"], "{u}");
    assert!(u["model"].as_str().is_some_and(|m| m.starts_with("claude-opus-4-8")), "{u}");
}

/// The price table of the tests' agents.toml: US dollars per million input, output,
/// cache-read and cache-write tokens, for Codex's model and the one Gemini's `auto` settles on.
const PRICE: [f64; 4] = [1.25, 10.0, 0.125, 1.5];
pub const PRICES: &str = "[prices.\"gpt-5.5\"]\ninput = 1.25\noutput = 10.0\ncache_read = 0.125\ncache_write = 1.5\n\n\
                      [prices.\"gemini-3.8-flash\"]\ninput = 1.25\noutput = 10.0\ncache_read = 0.125\ncache_write = 1.5\n";

/// `cli`'s task in a home whose agents.toml has `PRICES`, awaited; its status once it ended.
fn run_priced(cli: &Cli) -> (Task, Value) {
    let home = Home::new();
    std::fs::write(home.path().join("agents.toml"), PRICES).unwrap();
    let (task, _) = Task::run_async(home, cli, &[]);
    let v = task.home.run(&["--json", "await", "--timeout", "5m", &task.token], 0).json();
    let s = task.status();
    assert_eq!((v["status"].as_str(), s["status"].as_str()), (Some("completed"), Some("completed")), "{v}");
    // The await result carries the same figures.
    assert_eq!(v["usage"], s["usage"], "{v}");
    (task, s)
}

/// The usage's cost, which must be estimated and be `PRICE`'s arithmetic on its tokens.
fn assert_priced(u: &Value) {
    let want: f64 = tokens(u).iter().zip(PRICE).map(|(n, usd)| n.unwrap_or(0) as f64 / 1e6 * usd).sum();
    let cost = u["cost_usd"].as_f64().unwrap_or_else(|| panic!("no cost: {u}"));
    assert!((cost - want).abs() < 1e-12, "cost {cost}, the table's arithmetic {want}: {u}");
    assert_eq!(u["cost_estimated"], true, "{u}");
}

#[test]
fn codex_reports_the_apis_tokens_priced_from_the_table_as_an_estimate() {
    let api = FakeApi::start("streams.json");
    let mut cli = clis::codex(&api);
    // Codex's stream names no model: the command's own -m does (the config's model too).
    cli.argv.splice(2..2, ["-m".to_owned(), "gpt-5.5".to_owned()]);
    let (task, s) = run_priced(&cli);
    let u = &s["usage"];
    // turn.completed counts the cached and cache-written tokens inside its input: taken out.
    assert_eq!(tokens(u), SCRIPT, "{s}");
    let log = events(&task.log(&s));
    assert_eq!(only(&log, "turn.completed")["usage"]["input_tokens"], 1330);
    assert_eq!(u["session_id"], only(&log, "thread.started")["thread_id"], "{u}");
    assert_eq!((u["model"].as_str(), u["turns"].as_u64()), (Some("gpt-5.5"), Some(1)), "one turn per exec: {u}");
    assert_priced(u);
}

#[test]
fn gemini_reports_its_stats_tokens_and_model_calls_priced_from_the_table() {
    let api = FakeApi::start("streams.json");
    let (task, s) = run_priced(&clis::gemini(&api));
    let u = &s["usage"];
    // Its totals count the model router's call too (10 in, 20 out); it says no cache writes.
    assert_eq!(tokens(u), [Some(540), Some(80), Some(800), None], "{s}");
    let log = events(&task.log(&s));
    let stats = &only(&log, "result")["stats"];
    assert_eq!((stats["input"].as_u64(), stats["output_tokens"].as_u64()), (Some(540), Some(80)), "{stats}");
    assert_eq!(u["session_id"], only(&log, "init")["session_id"], "{u}");
    // `auto` chose the model: the one that used the most tokens.
    assert_eq!((u["model"].as_str(), u["turns"].as_u64()), (Some("gemini-3.8-flash"), Some(3)), "{u}");
    assert_priced(u);
}

#[test]
fn a_shell_command_ends_with_its_answer_and_no_usage() {
    let h = Home::new();
    let v = h.run(&["--json", "run", "--sync", "--", "sh", "-c", "echo hi"], 0).json();
    assert_eq!((v["status"].as_str(), v["summary"].as_str()), (Some("completed"), Some("hi")), "{v}");
    let token = v["token"].as_str().unwrap();
    assert_eq!((v.get("usage"), h.status(token).get("usage")), (None, None), "{v}");
}

#[test]
fn claude_asked_for_plain_text_ends_with_its_answer_and_no_usage() {
    let api = FakeApi::start("answer.json");
    let mut cli = clis::claude(&api);
    // Its text output says nothing of what it spent (the API did return counts).
    cli.argv.retain(|a| !["--output-format", "stream-json", "--verbose"].contains(&a.as_str()));
    let (task, v) = Task::run_sync(&cli, &[], 0);
    assert_eq!(v["status"], "completed", "{v}\nlog:\n{}", task.log(&v));
    assert_eq!(v["summary"].as_str(), Some(answer().trim_end()), "{v}");
    assert_eq!((v.get("usage"), task.status().get("usage")), (None, None), "{v}");
    assert_eq!(api.turns(), [0], "{}", api.requests());
}

fn answer() -> String {
    std::fs::read_to_string(transcripts().join("answer.md")).unwrap()
}
