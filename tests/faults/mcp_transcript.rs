//! A real client's session (`fixtures/mcp/`, recorded from the TypeScript SDK) replayed
//! against the server: every request gets the same kind of answer as when it was recorded.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::{Home, fixtures};
use crate::mcp_protocol::nonstandard_formats;
use crate::raw_mcp::RawMcp;

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

fn tool_names(v: &Value) -> BTreeSet<String> {
    v["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// Check `got` answers `request` as `recorded` did: result or error, the same error code, the
/// tools (and maybe newer ones), `isError`, and at least the recorded fields.
fn check_answer(request: &Value, recorded: &Value, got: &Value) {
    let method = request["method"].as_str().unwrap();
    let what = format!("{method} {}: recorded {recorded}\n got {got}", request["params"]);
    assert_eq!(got.get("error").is_some(), recorded.get("error").is_some(), "{what}");
    assert_eq!(got["error"]["code"], recorded["error"]["code"], "{what}");
    match method {
        "initialize" => {
            let (g, r) = (&got["result"], &recorded["result"]);
            assert_eq!(g["protocolVersion"], r["protocolVersion"], "{what}");
            assert_eq!(g["serverInfo"]["name"], r["serverInfo"]["name"], "{what}");
            assert_eq!(keys(&g["capabilities"]), keys(&r["capabilities"]), "{what}");
        }
        "tools/list" => {
            // Every tool the client saw is still offered; a tool added since (`usage`) takes
            // nothing from a session recorded before it.
            assert!(tool_names(got).is_superset(&tool_names(recorded)), "{what}");
            let mut found = Vec::new();
            for t in got["result"]["tools"].as_array().unwrap() {
                nonstandard_formats(&t["inputSchema"], "input", &mut found);
                nonstandard_formats(&t["outputSchema"], "output", &mut found);
            }
            assert!(found.is_empty(), "non-standard formats: {found:?}");
        }
        "tools/call" => {
            let (g, r) = (&got["result"], &recorded["result"]);
            assert_eq!(g["isError"], r["isError"], "{what}");
            assert!(keys(&g["structuredContent"]).is_superset(&keys(&r["structuredContent"])), "{what}");
            assert_eq!(g["structuredContent"]["type"], r["structuredContent"]["type"], "{what}");
        }
        _ => assert_eq!(got["result"], recorded["result"], "{what}"),
    }
}

#[test]
fn a_recorded_typescript_sdk_session_replays_with_the_same_answers() {
    let text = std::fs::read_to_string(fixtures().join("mcp/ts-sdk-1.32.2.jsonl")).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let h = Home::new();
    let mut mcp = RawMcp::spawn(&h, &[]);
    let mut answered = 0;
    for (i, msg) in lines.iter().enumerate() {
        // The client's messages, each request followed by the server's recorded answer.
        if msg.get("method").is_none() {
            continue;
        }
        mcp.send(msg);
        let Some(id) = msg.get("id") else { continue };
        let recorded = &lines[i + 1];
        assert_eq!(&recorded["id"], id, "the recording answers request {id} next");
        let got = loop {
            let m = mcp.receive().expect("the server answered");
            if m.get("id") == Some(id) {
                break m;
            }
        };
        check_answer(msg, recorded, &got);
        answered += 1;
    }
    assert_eq!(answered, 10);
    assert_eq!(mcp.close(), Some(0));
}
