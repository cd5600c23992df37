//! Each CLI, run by `agentctl run --sync`, completes the three-call script of `streams.json`
//! (a shell call, a write of notes.txt, the answer) and its task's log holds its structured
//! stream, with the usage the fake API returned.

use serde_json::Value;

use crate::clis::{self, Cli};
use crate::common::{Home, check};
use crate::fake_api::{FakeApi, transcripts};

/// Run `cli` as a task of a fresh home against `api`; its JSON result and the JSON lines of its log.
fn run_script(cli: &Cli, api: &FakeApi) -> (Value, Vec<Value>) {
    let home = Home::new();
    // A hang guard: a CLI that retries a failing API for ever ends as timed out.
    let args: Vec<&str> = ["--json", "run", "--sync", "--timeout", "5m", "--"]
        .into_iter()
        .chain(cli.argv.iter().map(String::as_str))
        .collect();
    let out = cli.agentctl(&home, &args).output().unwrap();
    let result = check(&args, out, 0).json();
    let log = std::fs::read_to_string(result["log_path"].as_str().unwrap()).unwrap();
    assert_eq!(result["status"], "completed", "{result}\nlog:\n{log}\nrequests:\n{}", api.requests());
    assert_eq!(api.turns(), [0, 1, 2], "the script's turns, in order; requests:\n{}\nlog:\n{log}", api.requests());
    let notes = std::fs::read_to_string(cli.work().join("notes.txt")).unwrap_or_default();
    assert_eq!(notes, "step two\n", "the write turn's file; log:\n{log}");
    // The log has stderr too (warnings): the stream is its lines of JSON.
    let events = log.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect::<Vec<_>>();
    assert!(!events.is_empty(), "no JSON line in the log:\n{log}");
    (result, events)
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn answer() -> String {
    std::fs::read_to_string(transcripts().join("answer.md")).unwrap()
}

#[test]
fn claude_streams_its_three_turns_and_totals() {
    let api = FakeApi::start("streams.json");
    let (_, events) = run_script(&clis::claude(&api), &api);
    let result = of_type(&events, "result");
    let [result] = result.as_slice() else { panic!("one result event: {events:?}") };
    assert_eq!(result["num_turns"], 3);
    assert_eq!(result["result"], answer());
    let usage = &result["usage"];
    let counts = ["input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"]
        .map(|k| usage[k].clone());
    assert_eq!(counts, [330, 60, 800, 200].map(Value::from), "{usage}");
    assert!(result["total_cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{result}");
}

#[test]
fn codex_streams_its_items_and_turn_usage() {
    let api = FakeApi::start("streams.json");
    let (_, events) = run_script(&clis::codex(&api), &api);
    assert_eq!(of_type(&events, "thread.started").len(), 1, "{events:?}");
    let done = of_type(&events, "turn.completed");
    let [done] = done.as_slice() else { panic!("one turn.completed: {events:?}") };
    // Cached tokens are counted inside input_tokens: 330 + 800 + 200.
    assert_eq!(done["usage"]["input_tokens"], 1330, "{done}");
    assert_eq!(done["usage"]["cached_input_tokens"], 800, "{done}");
    assert_eq!(done["usage"]["output_tokens"], 60, "{done}");
    let commands = events.iter().filter(|e| e["item"]["type"] == "command_execution").count();
    assert!(commands >= 1, "{events:?}");
}

#[test]
fn gemini_streams_its_tool_calls_and_stats() {
    let api = FakeApi::start("streams.json");
    let (_, events) = run_script(&clis::gemini(&api), &api);
    let tools: Vec<_> = of_type(&events, "tool_use").iter().map(|e| e["tool_name"].clone()).collect();
    assert_eq!(tools, ["run_shell_command", "write_file"].map(Value::from), "{events:?}");
    let result = of_type(&events, "result");
    let [result] = result.as_slice() else { panic!("one result event: {events:?}") };
    // The conversation's model alone: the totals also count the router's utility call.
    let conversation = &result["stats"]["models"]["gemini-3.8-flash"];
    assert_eq!(conversation["input_tokens"], 1330, "{result}");
    assert_eq!(conversation["output_tokens"], 60, "{result}");
    assert_eq!(conversation["cached"], 800, "{result}");
}

#[test]
fn opencode_streams_a_step_per_model_call() {
    let api = FakeApi::start("streams.json");
    let (_, events) = run_script(&clis::opencode(&api), &api);
    let steps = of_type(&events, "step_finish");
    let tokens = |k: &str| steps.iter().map(|s| s["part"]["tokens"][k].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(tokens("output"), [10, 20, 30], "{events:?}");
    // Chat Completions cannot say cache writes: turn 1's 200 are input.
    assert_eq!(tokens("input"), [300, 110, 120], "{events:?}");
    let texts = of_type(&events, "text");
    assert_eq!(texts.last().unwrap()["part"]["text"], answer());
}

#[test]
fn copilot_streams_its_turns_and_writes_usage_to_a_file() {
    let api = FakeApi::start("streams.json");
    let cli = clis::copilot(&api);
    let (_, events) = run_script(&cli, &api);
    assert_eq!(of_type(&events, "assistant.turn_start").len(), 3, "{events:?}");
    let result = of_type(&events, "result");
    let [result] = result.as_slice() else { panic!("one result event: {events:?}") };
    assert_eq!(result["exitCode"], 0, "{result}");
    let usage: Value =
        serde_json::from_str(&std::fs::read_to_string(cli.dir().join("copilot-usage.json")).unwrap()).unwrap();
    let model = &usage["modelMetrics"]["gpt-5.5"]["usage"];
    assert_eq!(model["inputTokens"], 1330, "{usage}");
    assert_eq!(model["outputTokens"], 60, "{usage}");
}
