//! Each built-in role (`agentctl ask claude …` with no agents.toml) runs its real CLI in the
//! permission mode its template chose, and that mode lets the agent work unattended in its
//! own directory: a shell command that writes a file (one Claude Code's `acceptEdits` alone
//! would refuse) and a file written by the agent's edit tool both happen, with nobody at a
//! prompt. What each CLI's test setup adds to trust or allow tools is taken away first, so
//! the template's own flags are what allows them. Each task's answer and usage are read from
//! the stream its template asks for: the answer and the exact figures of `STREAMS.md`.

use serde_json::{Value, json};

use crate::clis::{self, Cli, PROMPT};
use crate::common::{Home, check};
use crate::fake_api::{FakeApi, transcripts};

/// The script of `streams.json` with a shell turn that writes `by-shell` (through python3,
/// which no CLI counts as a read-only or file command).
fn api() -> (FakeApi, tempfile::TempDir) {
    let dir = tempfile::Builder::new().prefix("agentctl-builtin-script").tempdir().unwrap();
    let mut script: Value =
        serde_json::from_str(&std::fs::read_to_string(transcripts().join("streams.json")).unwrap()).unwrap();
    script["turns"][0]["command"] = json!("python3 -c \"open('by-shell', 'w').write('ran')\"");
    script["turns"][2]["answer_file"] = json!(transcripts().join("answer.md"));
    let path = dir.path().join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    (FakeApi::start(path.to_str().unwrap()), dir)
}

/// `ask --sync KIND` in a home with no agents file; its JSON result once the script ran whole.
fn ask_builtin(kind: &str, cli: &Cli, api: &FakeApi) -> Value {
    let home = Home::new();
    let args = ["--json", "ask", "--sync", "--timeout", "5m", kind, PROMPT];
    let v = check(&args, cli.agentctl(&home, &args).output().unwrap(), 0).json();
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert_eq!(v["status"], "completed", "{v}\nlog:\n{log}");
    assert_eq!(api.turns(), [0, 1, 2], "requests:\n{}\nlog:\n{log}", api.requests());
    let file = |name: &str| std::fs::read_to_string(cli.work().join(name)).unwrap_or_default();
    assert_eq!(file("by-shell"), "ran", "{kind}'s shell command did not run; log:\n{log}");
    assert_eq!(file("notes.txt"), "step two\n", "{kind}'s write did not happen; log:\n{log}");
    v
}

fn without(mut cli: Cli, name: &str) -> Cli {
    cli.env.retain(|(k, _)| k != name);
    cli
}

fn answer() -> String {
    std::fs::read_to_string(transcripts().join("answer.md")).unwrap().trim_end().to_owned()
}

/// The task's usage as its result says it: input, output, cache read, cache write, turns
/// (`null` where unknown), and whether it names its session.
fn usage(v: &Value) -> ([Value; 5], bool) {
    let u = &v["usage"];
    let figures = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "turns"];
    (figures.map(|k| u[k].clone()), u["session_id"].is_string())
}

/// `[input, output, cache read, cache write, turns]` as JSON, `None` for unknown.
fn want(figures: [Option<u64>; 5]) -> ([Value; 5], bool) {
    (figures.map(|f| f.map_or(Value::Null, Value::from)), true)
}

#[test]
fn claude_edits_and_runs_commands_as_root_without_bypassing_permissions() {
    let (api, _script) = api();
    let v = ask_builtin("claude", &without(clis::claude(&api), "IS_SANDBOX"), &api);
    assert_eq!(v["summary"], answer());
    assert_eq!(usage(&v), want([Some(330), Some(60), Some(800), Some(200), Some(3)]), "{v}");
    assert_eq!(v["usage"]["cost_usd"], 0.0048000000000000004, "{v}");
}

#[test]
fn codex_writes_in_its_workspace_and_answers_in_its_file() {
    let (api, _script) = api();
    let v = ask_builtin("codex", &clis::codex(&api), &api);
    assert_eq!(v["summary"], answer());
    assert_eq!(usage(&v), want([Some(330), Some(60), Some(800), Some(200), Some(1)]), "{v}");
}

#[test]
fn gemini_runs_its_tools_in_a_folder_nobody_trusted() {
    let (api, _script) = api();
    let v = ask_builtin("gemini", &without(clis::gemini(&api), "GEMINI_CLI_TRUST_WORKSPACE"), &api);
    assert_eq!(v["summary"], answer());
    // Its totals include its model router's call (10 in, 20 out).
    assert_eq!(usage(&v), want([Some(540), Some(80), Some(800), None, Some(3)]), "{v}");
}

#[test]
fn opencode_runs_its_tools_with_its_default_permissions() {
    let (api, _script) = api();
    let cli = clis::opencode(&api);
    let config = cli.home().join(".config/opencode/opencode.json");
    let mut c: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    c.as_object_mut().unwrap().remove("permission").expect("the test setup allows edit and bash");
    std::fs::write(&config, c.to_string()).unwrap();
    let v = ask_builtin("opencode", &cli, &api);
    assert_eq!(v["summary"], answer());
    assert_eq!(usage(&v), want([Some(530), Some(60), Some(800), Some(0), Some(3)]), "{v}");
    assert!((v["usage"]["cost_usd"].as_f64().unwrap() - 0.00273).abs() < 1e-12, "{v}");
}

#[test]
fn copilot_runs_its_tools_allowed_in_its_own_directory() {
    let (api, _script) = api();
    let v = ask_builtin("copilot", &clis::copilot(&api), &api);
    assert_eq!(v["summary"], answer());
    // Its stream has no token counts.
    assert_eq!(usage(&v), want([None, None, None, None, Some(3)]), "{v}");
}
