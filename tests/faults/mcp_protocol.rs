//! `agentctl mcp` at the protocol's edges, in raw JSON-RPC: methods it does not offer, the
//! schemas it publishes, and how it starts and ends (stdin at EOF, stdin a terminal).

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{BIN, Home, wait_until};
use crate::raw_mcp::RawMcp;

const METHOD_NOT_FOUND: i64 = -32601;

/// Requests for what the server does not advertise (it offers tools only).
fn unadvertised() -> Vec<(&'static str, Value)> {
    vec![
        ("prompts/list", json!({})),
        ("prompts/get", json!({"name": "x"})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": "file:///etc/passwd"})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}}),
        ),
    ]
}

fn assert_method_not_found(method: &str, reply: &Value) {
    assert_eq!(reply["error"]["code"], METHOD_NOT_FOUND, "{method}: {reply}");
}

#[test]
fn the_initialize_protocol_answers_ping_and_nothing_it_does_not_advertise() {
    let h = Home::new();
    // Ping is allowed before initialize, and answered.
    let mut mcp = RawMcp::spawn(&h, &[]);
    mcp.send(&json!({"jsonrpc": "2.0", "id": "early", "method": "ping"}));
    let reply = mcp.receive().unwrap();
    assert_eq!((&reply["id"], &reply["result"]), (&json!("early"), &json!({})), "{reply}");
    drop(mcp);

    let mut mcp = RawMcp::start(&h, &[]);
    assert_eq!(mcp.request("ping", json!({}))["result"], json!({}));
    for (method, params) in unadvertised() {
        assert_method_not_found(method, &mcp.request(method, params));
    }
    let tools = mcp.request("tools/list", json!({}));
    assert!(tools["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{tools}");
    assert_eq!(mcp.request("ping", json!({}))["result"], json!({}), "still serving");
    assert_eq!(mcp.close(), Some(0));
}

#[test]
fn the_stateless_protocol_answers_nothing_it_does_not_advertise_not_even_ping() {
    let h = Home::new();
    // As the first message, before any lifecycle is chosen.
    let mut mcp = RawMcp::start_2026(&h, &[]);
    assert_method_not_found("ping", &mcp.request("ping", json!({})));
    for (method, params) in unadvertised() {
        assert_method_not_found(method, &mcp.request(method, params));
    }
    let tools = mcp.request("tools/list", json!({}));
    assert!(tools["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{tools}");
    assert_method_not_found("ping", &mcp.request("ping", json!({})));
    // Even without `_meta`: there is no ping on this protocol.
    mcp.send(&json!({"jsonrpc": "2.0", "id": 99, "method": "ping"}));
    assert_method_not_found("bare ping", &mcp.receive().unwrap());
    assert_eq!(mcp.request("tools/call", json!({"name": "list", "arguments": {}}))["result"]["isError"], false);
    assert_eq!(mcp.close(), Some(0));
}

/// JSON Schema's own formats (2020-12); schemars adds others (`uint64`, `int32`, `double`…)
/// that validators warn about.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Every non-standard `format` in `schema`, with where it is.
pub fn nonstandard_formats(schema: &Value, at: &str, found: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("format", Value::String(f)) if !STANDARD_FORMATS.contains(&f.as_str()) => {
                        found.push(format!("{at}: {f}"))
                    }
                    ("enum" | "const" | "default" | "examples", _) => {}
                    _ => nonstandard_formats(v, &format!("{at}/{k}"), found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| nonstandard_formats(v, at, found)),
        _ => {}
    }
}

#[test]
fn published_schemas_carry_only_standard_formats() {
    let h = Home::new();
    for (flags, tools) in [(&[][..], 10), (&["--allow-run"][..], 11)] {
        let mut mcp = RawMcp::start(&h, flags);
        let list = mcp.request("tools/list", json!({}));
        let list = list["result"]["tools"].as_array().unwrap();
        assert_eq!(list.len(), tools);
        let mut found = Vec::new();
        for t in list {
            for which in ["inputSchema", "outputSchema"] {
                nonstandard_formats(&t[which], &format!("{}.{which}", t["name"]), &mut found);
            }
            // Stripping formats keeps the types.
            assert_eq!(t["outputSchema"]["type"], "object", "{t}");
        }
        assert!(found.is_empty(), "non-standard formats: {found:?}");
        let logs = list.iter().find(|t| t["name"] == "logs").unwrap();
        // Optional parameters are typed as themselves: agentctl never needs a null.
        assert_eq!(logs["inputSchema"]["properties"]["offset"]["type"], "integer");
        assert_eq!(logs["inputSchema"]["properties"]["offset"]["minimum"], 0);
    }
}

#[test]
fn eof_on_stdin_is_a_clean_exit_before_and_after_initialize() {
    // A home agentctl creates itself, so nothing else goes to stderr.
    let h = Home::under("home");
    let out = h.cmd().arg("mcp").stdin(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    // Not a terminal: nothing to explain.
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));

    let mcp = RawMcp::start(&h, &[]);
    assert_eq!(mcp.close(), Some(0));
    let mut mcp = RawMcp::start_2026(&h, &[]);
    mcp.request("tools/list", json!({}));
    assert_eq!(mcp.close(), Some(0));
}

#[test]
fn started_in_a_terminal_it_says_what_it_is_and_ctrl_d_quits() {
    let h = Home::new();
    let inner = format!("'{BIN}' --home '{}' mcp", h.path().display());
    // `script` runs the server on a pty and copies what the pty shows to our pipe.
    let mut term = Command::new("script")
        .args(["-qfec", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the `script` command (util-linux) is needed for this test");
    let shown = Arc::new(Mutex::new(Vec::new()));
    let mut pty = term.stdout.take().unwrap();
    let reader = {
        let shown = shown.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pty.read(&mut buf) {
                shown.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let text = || String::from_utf8_lossy(&shown.lock().unwrap()).into_owned();
    wait_until(Duration::from_secs(20), "the server's line on the terminal", || text().contains("Ctrl-D"));
    let line = text();
    assert!(line.contains("agentctl mcp: serving MCP on stdin/stdout"), "{line}");
    assert!(line.contains("MCP client"), "{line}");
    // Ctrl-D at the start of a line: the terminal reads as end of file.
    term.stdin.as_mut().unwrap().write_all(b"\x04").unwrap();
    let status = term.wait().unwrap();
    reader.join().unwrap();
    assert_eq!(status.code(), Some(0), "{}", text());
    assert!(!text().contains("internal error") && !text().contains("could not start"), "{}", text());
}
