//! Events reach a caller once, even when the caller goes away: waits given up without a
//! cancel, servers that close or die holding an answer, and two orchestrators on one home.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::common::{Home, fake_agent};
use crate::raw_mcp::RawMcp;

/// Send a `wait_for_event` call with `id` and do not wait for its answer.
fn send_wait(mcp: &mut RawMcp, id: u64, args: Value) {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "wait_for_event", "arguments": args}});
    mcp.send(&msg);
}

/// Read until the answers to `ids` have all come; each one's structured result by id.
fn answers(mcp: &mut RawMcp, ids: &[u64]) -> Vec<(u64, Value)> {
    let mut got = Vec::new();
    while got.len() < ids.len() {
        let msg = mcp.receive().expect("the server answered");
        if let Some(id) = msg["id"].as_u64().filter(|id| ids.contains(id)) {
            got.push((id, msg["result"]["structuredContent"].clone()));
        }
    }
    got.sort_by_key(|(id, _)| *id);
    got
}

#[test]
fn a_wait_given_up_without_a_cancel_is_taken_over_by_the_next_one() {
    let h = Home::new();
    let mut mcp = RawMcp::start(&h, &[]);
    // The client gives up on call 100 (its own timeout) without telling the server, and waits
    // again: the event posted next goes to the call it still reads. (Call 100's first progress
    // report shows it is under way before call 101 is sent, as a client's timeout would.)
    let msg = json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call", "params": {
        "name": "wait_for_event", "arguments": {"session": "s", "timeout_secs": 30}, "_meta": {"progressToken": "w100"}}});
    mcp.send(&msg);
    while mcp.receive().expect("the server answered")["params"]["progressToken"] != "w100" {}
    send_wait(&mut mcp, 101, json!({"session": "s", "timeout_secs": 30}));
    let old = answers(&mut mcp, &[100]).remove(0).1;
    assert_eq!(old["type"], "timeout", "{old}");
    assert!(old["note"].as_str().is_some_and(|n| n.contains("newer wait_for_event")), "{old}");
    h.run(&["notify", "--session", "s", "hello"], 0);
    let new = answers(&mut mcp, &[101]).remove(0).1;
    assert_eq!(new["text"], "hello", "{new}");
    // A wait on another session, or for other types, is not taken over.
    send_wait(&mut mcp, 102, json!({"session": "s", "types": ["question"], "timeout_secs": 30}));
    send_wait(&mut mcp, 103, json!({"session": "s", "types": ["message"], "timeout_secs": 30}));
    h.run(&["notify", "--session", "s", "--question", "which?"], 0);
    h.run(&["notify", "--session", "s", "fyi"], 0);
    let got = answers(&mut mcp, &[102, 103]);
    assert_eq!((got[0].1["text"].as_str(), got[1].1["text"].as_str()), (Some("which?"), Some("fyi")), "{got:?}");
    assert_eq!(mcp.close(), Some(0));
}

#[test]
fn an_answer_never_confirmed_goes_to_the_next_waiter_and_a_confirmed_one_never_again() {
    let h = Home::new();
    // Handed out, then the client went away before its next wait: not known to have arrived.
    let mut a = RawMcp::start(&h, &[]);
    send_wait(&mut a, 1, json!({"session": "s", "timeout_secs": 30}));
    h.run(&["notify", "--session", "s", "first"], 0);
    assert_eq!(answers(&mut a, &[1])[0].1["text"], "first");
    assert_eq!(a.close(), Some(0));
    let again = h.run(&["--json", "wait", "--session", "s", "--timeout", "5s"], 0).json();
    assert_eq!(again["text"], "first", "{again}");

    // Handed out, and the same connection waited again: it arrived; nobody gets it again.
    let mut b = RawMcp::start(&h, &[]);
    send_wait(&mut b, 1, json!({"session": "s", "timeout_secs": 30}));
    h.run(&["notify", "--session", "s", "second"], 0);
    assert_eq!(answers(&mut b, &[1])[0].1["text"], "second");
    let next = b.call("wait_for_event", json!({"session": "s", "timeout_secs": 0.1}));
    assert_eq!(next["structuredContent"]["type"], "timeout");
    assert_eq!(b.close(), Some(0));
    h.run(&["--json", "wait", "--session", "s", "--timeout", "0.2s"], 124);

    // Handed out by a server that was then killed: its hold dies with it.
    let mut c = RawMcp::start(&h, &[]);
    send_wait(&mut c, 1, json!({"session": "s", "timeout_secs": 30}));
    h.run(&["notify", "--session", "s", "third"], 0);
    assert_eq!(answers(&mut c, &[1])[0].1["text"], "third");
    c.server.kill().unwrap();
    c.server.wait().unwrap();
    let again = h.run(&["--json", "wait", "--session", "s", "--timeout", "5s"], 0).json();
    assert_eq!(again["text"], "third", "{again}");
}

#[test]
fn two_orchestrators_on_one_home_each_get_exactly_their_own_events() {
    let h = Home::new();
    let fake = fake_agent();
    let results: Vec<(String, BTreeSet<String>, BTreeSet<String>)> = std::thread::scope(|s| {
        let servers: Vec<_> = (0..2)
            .map(|i| {
                let (h, fake) = (&h, &fake);
                s.spawn(move || {
                    let mut mcp = RawMcp::start(h, &["--allow-run"]);
                    let mut started = BTreeSet::new();
                    let mut session = String::new();
                    for n in 0..5 {
                        let delay = format!("0.{}", (n * 3 + i) % 10);
                        let r = mcp.call("run", json!({"command": [fake, "sleep", delay], "async": true}));
                        let v = &r["structuredContent"];
                        session = v["session"].as_str().unwrap().to_owned();
                        started.insert(v["token"].as_str().unwrap().to_owned());
                    }
                    let mut got = BTreeSet::new();
                    for _ in 0..5 {
                        let e = mcp.call("wait_for_event", json!({"timeout_secs": 30}));
                        let e = &e["structuredContent"];
                        assert_eq!(e["type"], "task_finished", "{e}");
                        got.insert(e["token"].as_str().unwrap().to_owned());
                    }
                    let after = mcp.call("wait_for_event", json!({"timeout_secs": 0.2}));
                    assert_eq!(after["structuredContent"]["type"], "timeout");
                    assert_eq!(mcp.close(), Some(0));
                    (session, started, got)
                })
            })
            .collect();
        servers.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let (a, b) = (&results[0], &results[1]);
    assert!(a.0.starts_with("mcp-") && b.0.starts_with("mcp-") && a.0 != b.0, "sessions {} and {}", a.0, b.0);
    assert_eq!(a.1, a.2, "the first orchestrator's events");
    assert_eq!(b.1, b.2, "the second orchestrator's events");
    // A restarted client resumes its session by name.
    let mut again = RawMcp::start(&h, &["--allow-run"]);
    h.run(&["notify", "--session", &a.0, "for the first"], 0);
    let e = again.call("wait_for_event", json!({"session": a.0, "timeout_secs": 5}));
    assert_eq!(e["structuredContent"]["text"], "for the first");
    assert_eq!(again.close(), Some(0));
}
