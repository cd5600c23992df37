//! `agentctl mcp` given requests it cannot use, in raw JSON-RPC on both protocols: each gets an
//! answer that says what is wrong and what to do (a JSON-RPC error answering its id when that
//! can be read, or a tool result a model can act on, naming no path of the machine), and the
//! server goes on serving.

use serde_json::{Value, json};

use crate::common::Home;
use crate::raw_mcp::{RawMcp, meta_2026};

/// The raw server on each protocol: an `initialize` session, and a stateless one whose
/// requests carry `meta` (`None` on the other).
fn both(h: &Home) -> [(RawMcp, Option<Value>); 2] {
    [(RawMcp::start(h, &[]), None), (RawMcp::start_2026(h, &[]), Some(meta_2026()))]
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
