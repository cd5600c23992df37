//! `agentctl mcp` at the protocol's edges, in raw JSON-RPC: methods it does not offer, the
//! schemas it publishes, and how it starts and ends (stdin at EOF, stdin a terminal).

use serde_json::{Value, json};

use crate::common::Home;
use crate::raw_mcp::RawMcp;

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
