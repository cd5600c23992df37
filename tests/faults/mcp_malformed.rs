//! `agentctl mcp` given requests it cannot use, in raw JSON-RPC on both protocols: each gets an
//! answer that says what is wrong and what to do (a JSON-RPC error answering its id when that
//! can be read, or a tool result a model can act on, naming no path of the machine), and the
//! server goes on serving.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Home, fake_agent};
use crate::raw_mcp::{RawMcp, meta_2026};

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// Longer than any answer takes: the server used to stay silent for good.
const HANG: Duration = Duration::from_secs(30);

/// The raw server on each protocol: an `initialize` session, and a stateless one whose
/// requests carry `meta` (`None` on the other).
fn both(h: &Home) -> [(RawMcp, Option<Value>); 2] {
    [(RawMcp::start(h, &[]), None), (RawMcp::start_2026(h, &[]), Some(meta_2026()))]
}

/// `params` with the protocol's `_meta`, if it has one and `params` is an object without one.
fn with_meta(mut params: Value, meta: &Option<Value>) -> Value {
    if let (Some(m), Some(p)) = (meta, params.as_object_mut()) {
        p.entry("_meta").or_insert_with(|| m.clone());
    }
    params
}

/// The error the server answers `line` with, checking it answers the request `id`.
fn error_for(mcp: &mut RawMcp, line: &str, id: Value) -> Value {
    mcp.send_line(line);
    let reply = mcp.receive_within(HANG);
    assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
    assert_eq!(reply.get("id"), Some(&id), "answers its request (`id` null when unreadable): {reply}");
    assert!(reply.get("result").is_none(), "{reply}");
    reply["error"].clone()
}

/// The server still answers an ordinary request.
fn still_serving(mcp: &mut RawMcp, meta: &Option<Value>) {
    let tools = mcp.request("tools/list", with_meta(json!({}), meta));
    assert!(tools["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{tools}");
}

#[test]
fn lines_it_cannot_read_are_answered_and_it_goes_on_serving() {
    let h = Home::new();
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":41,"method":"tools/list","params":{{"deep":{}{}}}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    for (mut mcp, meta) in both(&h) {
        // `_meta` a string: invalid params, answering its request.
        for (id, method) in [(31, "tools/list"), (32, "tools/call"), (33, "ping")] {
            let params = json!({"_meta": "x", "name": "list", "arguments": {}});
            let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
            let e = error_for(&mut mcp, &line, json!(id));
            if method == "ping" && meta.is_some() {
                // Protocol 2026-07-28 has no ping, however it is sent.
                assert_eq!(e["code"], METHOD_NOT_FOUND, "{e}");
            } else {
                assert_eq!(e["code"], INVALID_PARAMS, "{method}: {e}");
                assert!(e["message"].as_str().unwrap().contains("`_meta` must be an object"), "{e}");
            }
            still_serving(&mut mcp, &meta);
        }
        // JSON nested 5 000 deep (serde_json reads 128 levels), or cut short: a parse error.
        for line in [deep.as_str(), r#"{"jsonrpc":"2.0","id":42,"method":"tools/list""#, "not json"] {
            let e = error_for(&mut mcp, line, Value::Null);
            assert_eq!(e["code"], PARSE_ERROR, "{e}");
            assert!(e["message"].as_str().unwrap().contains("one JSON-RPC message"), "{e}");
            still_serving(&mut mcp, &meta);
        }
        // JSON that is no request: an invalid request, with its id when it has a readable one.
        for (line, id) in [
            ("5".to_owned(), Value::Null),
            (json!([{"jsonrpc": "2.0", "id": 51, "method": "ping"}]).to_string(), Value::Null),
            (json!({"jsonrpc": "2.0", "id": true, "method": "ping"}).to_string(), Value::Null),
            (json!({"jsonrpc": "2.0", "id": 52, "method": 7}).to_string(), json!(52)),
            (json!({"jsonrpc": "1.0", "id": "s", "method": "ping"}).to_string(), json!("s")),
        ] {
            let e = error_for(&mut mcp, &line, id);
            assert_eq!(e["code"], INVALID_REQUEST, "{line}: {e}");
            still_serving(&mut mcp, &meta);
        }
        // Params that are not an object, for a method served here.
        let line = json!({"jsonrpc": "2.0", "id": 61, "method": "tools/call", "params": 5}).to_string();
        assert_eq!(error_for(&mut mcp, &line, json!(61))["code"], INVALID_PARAMS);
        // A notification is never answered, even unreadable: the next answer is the next request's.
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": "x"}}));
        still_serving(&mut mcp, &meta);
        assert_eq!(mcp.close(), Some(0));
    }
}

#[test]
fn wrongly_shaped_task_requests_are_invalid_params_and_name_what_is_wrong() {
    let h = Home::new();
    let mut mcp = RawMcp::start_2026(&h, &[]);
    let meta = Some(meta_2026());
    let mut id = 100;
    for (method, params, says) in [
        ("tasks/get", json!({"taskId": 5}), "`taskId` is the number 5 where it must be a string"),
        ("tasks/get", json!({"taskId": null}), "`taskId` is null where it must be a string"),
        ("tasks/get", json!({"taskId": {}}), "`taskId` is an object where it must be a string"),
        ("tasks/get", json!({}), "`taskId` is missing"),
        ("tasks/cancel", json!({"taskId": 5}), "`taskId` is the number 5"),
        ("tasks/update", json!({"taskId": "t", "inputResponses": []}), "`inputResponses` is an empty list"),
        ("tasks/update", json!({"taskId": "t", "inputResponses": "yes"}), "`inputResponses` is a string"),
        ("tasks/update", json!({"taskId": "t"}), "`inputResponses` is missing"),
        ("tasks/update", json!({"inputResponses": {}}), "`taskId` is missing"),
    ] {
        id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": with_meta(params.clone(), &meta)});
        let e = error_for(&mut mcp, &line.to_string(), json!(id));
        assert_eq!(e["code"], INVALID_PARAMS, "{method} {params}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("invalid params for {method}: {says}")), "{message}");
    }
    still_serving(&mut mcp, &meta);
    assert_eq!(mcp.close(), Some(0));

    // An `initialize` session has no tasks at all, however the request is shaped.
    let mut mcp = RawMcp::start(&h, &[]);
    for params in [json!({"taskId": 5}), json!({"taskId": "t"})] {
        assert_eq!(mcp.request("tasks/get", params)["error"]["code"], METHOD_NOT_FOUND);
    }
    still_serving(&mut mcp, &None);
    assert_eq!(mcp.close(), Some(0));
}

#[test]
fn tool_arguments_that_do_not_fit_are_named_with_what_they_must_be_and_the_call_to_make() {
    let h = Home::new();
    for (mut mcp, _) in both(&h) {
        for (tool, args, says) in [
            (
                "ask",
                json!({"role": "reviewer"}),
                "`question` (the task for the agent) is missing: it must be a string; call `ask` again with \
                 `question` as a string",
            ),
            (
                "halt",
                json!({"token": "a3f2c1", "grace_secs": "5"}),
                "`grace_secs` is a string where it must be a number; call `halt` again with `grace_secs`: 5",
            ),
            ("halt", json!({}), "`token` (the task's token) is missing"),
            ("await", json!({}), "`await` needs `token` (a task's token, like a3f2c1) or `tokens`"),
            ("await", json!({"tokens": "a3f2c1"}), "call `await` again with `tokens`: [\"a3f2c1\"]"),
            ("logs", json!({"token": "a3f2c1", "offset": -1}), "`offset` is the number -1 where it must be a whole"),
            ("reply", json!({"answer": "yes"}), "`reply` needs one of `question_id`"),
        ] {
            let r = mcp.call(tool, args.clone());
            assert_eq!(r["isError"], true, "{tool} {args}: {r}");
            let text = r["content"][0]["text"].as_str().unwrap();
            assert!(text.contains(says), "{tool} {args}: {text}");
            assert!(!text.contains("deserialize"), "{text}");
        }
        assert_eq!(mcp.close(), Some(0));
    }
}

#[test]
fn errors_reach_a_client_without_the_paths_of_the_home() {
    let h = Home::new();
    let home = h.path().to_str().unwrap().to_owned();
    let v = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0", "an answer"], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    let log = PathBuf::from(v["log_path"].as_str().unwrap());
    // A log replaced by a symlink: refused, saying which file, but not where it is.
    std::fs::remove_file(&log).unwrap();
    symlink("/etc/hostname", &log).unwrap();
    let cli = h.run(&["logs", &token], 2);
    assert!(cli.stderr.contains(&home), "the CLI keeps its paths: {}", cli.stderr);
    for (mut mcp, _) in both(&h) {
        let answers = [
            mcp.call("logs", json!({"token": token})),
            mcp.call("await", json!({"token": "abcdef"})),
            mcp.call("halt", json!({"token": "abcdef"})),
        ];
        for r in &answers {
            assert_eq!(r["isError"], true, "{r}");
            assert!(!r.to_string().contains(&home), "{r}");
        }
        let refused = answers[0]["content"][0]["text"].as_str().unwrap();
        assert!(refused.contains(&format!("…/{token}.log is a symlink")), "{refused}");
        let unknown = answers[1]["content"][0]["text"].as_str().unwrap();
        assert!(unknown.starts_with("no task abcdef in this server's home; call `list`"), "{unknown}");
        assert_eq!(mcp.close(), Some(0));
    }
    // A taskId this home does not know (the tasks extension's "invalid params").
    let mut mcp = RawMcp::start_2026(&h, &[]);
    let mut meta = meta_2026();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let line = json!({"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"taskId": "nope", "_meta": meta}});
    let e = error_for(&mut mcp, &line.to_string(), json!(7));
    assert_eq!(e["code"], INVALID_PARAMS, "{e}");
    assert!(!e.to_string().contains(&home), "{e}");
    assert!(e["message"].as_str().unwrap().starts_with("no task nope in this server's home"), "{e}");
    assert_eq!(mcp.close(), Some(0));
}
