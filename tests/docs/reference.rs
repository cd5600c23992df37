//! The reference pages the code generates (docs/reference/commands.md from the clap
//! definitions, mcp-tools.md from the tools the server publishes) are the committed ones, and
//! the hand-written exit-codes.md names every error kind the code has.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::markdown::root;

/// The variable that makes these tests write the pages instead of comparing them.
const UPDATE: &str = "UPDATE_DOCS";

/// Compare `generated` with the committed `page` (or write it, under `UPDATE_DOCS=1`).
fn check(page: &str, generated: &str) {
    let path = root().join(page);
    if std::env::var_os(UPDATE).is_some() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let diff = committed.lines().zip(generated.lines()).position(|(a, b)| a != b);
        let at = diff.unwrap_or(committed.lines().count().min(generated.lines().count()));
        panic!(
            "{page} differs from what the code generates (first at line {}: {:?} where the code gives {:?}): \
             run `{UPDATE}=1 cargo test --test docs` to write it anew, and commit it",
            at + 1,
            committed.lines().nth(at).unwrap_or("(end)"),
            generated.lines().nth(at).unwrap_or("(end)"),
        );
    }
}

#[test]
fn the_command_reference_is_what_the_clap_definitions_say() {
    check("docs/reference/commands.md", &agentctl::cli::commands_markdown());
}

#[test]
fn the_mcp_tool_reference_is_what_the_server_publishes() {
    let home = tempfile::tempdir().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_agentctl"))
        .args(["mcp", "--allow-run"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"docs","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    ];
    // Closing stdin ends the server once it has answered.
    server.stdin.take().unwrap().write_all((requests.join("\n") + "\n").as_bytes()).unwrap();
    let out = server.wait_with_output().unwrap();
    let answers: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let answer =
        |id: u64| answers.iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("no answer {id}: {answers:?}"));
    check("docs/reference/mcp-tools.md", &mcp_page(&answer(1)["result"], &answer(2)["result"]["tools"]));
}

/// The MCP reference page: the server's instructions, then each tool with its parameters.
fn mcp_page(init: &Value, tools: &Value) -> String {
    let mut page = String::from(
        "# MCP tool reference\n\n\
         Generated from what `agentctl mcp --allow-run` publishes (`tools/list`, with a fresh home\n\
         and no agents file): do not edit it by hand, run `UPDATE_DOCS=1 cargo test --test docs`\n\
         to write it anew. How the server behaves is in [the MCP guide](../mcp.md).\n\n",
    );
    page += &format!(
        "## Instructions\n\nWhat the server tells every client at `initialize`:\n\n> {}\n",
        text(&init["instructions"])
    );
    for tool in tools.as_array().unwrap() {
        page += &format!("\n## `{}`\n\n{}\n", text(&tool["name"]), text(&tool["description"]));
        if tool["name"] == "run" {
            page += "\nOffered only by a server started with `--allow-run`.\n";
        }
        if let Some(hints) = tool["annotations"].as_object().filter(|h| !h.is_empty()) {
            let hints: Vec<String> = hints.iter().map(|(k, v)| format!("`{k}: {v}`")).collect();
            page += &format!("\nAnnotations: {}.\n", hints.join(", "));
        }
        let schema = &tool["inputSchema"];
        let required: Vec<&str> =
            schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let Some(props) = schema["properties"].as_object().filter(|p| !p.is_empty()) else {
            page += "\nNo parameters.\n";
            continue;
        };
        page += "\n| parameter | type | required | description |\n|---|---|---|---|\n";
        for (name, p) in props {
            let mut about = text(&p["description"]).replace('|', "\\|");
            if let Some(default) = p.get("default") {
                about += &format!(" Default: `{default}`.");
            }
            let needed = if required.contains(&name.as_str()) { "yes" } else { "" };
            page += &format!("| `{name}` | {} | {needed} | {} |\n", kind(p), about.trim());
        }
    }
    page
}

/// A JSON string's text, on one line.
fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A schema's type, as a person reads it (`string`, `array of string`, `string or integer`).
fn kind(p: &Value) -> String {
    if let Some(alternatives) = p["anyOf"].as_array().or(p["oneOf"].as_array()) {
        return alternatives.iter().map(kind).collect::<Vec<_>>().join(" or ");
    }
    let base = match &p["type"] {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => return format!("`{p}`"),
    };
    match p.get("items") {
        Some(items) if base == "array" => format!("array of {}", kind(items)),
        _ => base,
    }
}

/// Every `kind` an error's `--json` form can carry is explained in exit-codes.md.
#[test]
fn the_exit_code_page_names_every_error_kind() {
    let source = std::fs::read_to_string(root().join("src/error.rs")).unwrap();
    let body = source.split("pub fn kind(&self)").nth(1).expect("src/error.rs has `pub fn kind`");
    let body = &body[..body.find("\n    }\n").unwrap()];
    let kinds: Vec<&str> = body.split("=> \"").skip(1).map(|s| &s[..s.find('"').unwrap()]).collect();
    assert!(kinds.len() >= 10, "{kinds:?}");
    let page = std::fs::read_to_string(root().join("docs/reference/exit-codes.md")).unwrap();
    let missing: Vec<&&str> = kinds.iter().filter(|k| !page.contains(&format!("`{k}`"))).collect();
    assert!(missing.is_empty(), "docs/reference/exit-codes.md does not explain the error kinds {missing:?}");
}
