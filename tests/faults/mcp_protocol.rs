//! `agentctl mcp` at the protocol's edges, in raw JSON-RPC: methods it does not offer, the
//! schemas it publishes, and how it starts and ends (stdin at EOF, stdin a terminal).

use serde_json::{Value, json};

use crate::common::Home;
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
    for (flags, tools) in [(&[][..], 7), (&["--allow-run"][..], 8)] {
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
        assert_eq!(logs["inputSchema"]["properties"]["offset"]["type"], json!(["integer", "null"]));
        assert_eq!(logs["inputSchema"]["properties"]["offset"]["minimum"], 0);
    }
}
