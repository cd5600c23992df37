//! A minimal MCP client speaking raw JSON-RPC to `agentctl mcp` over stdio, for tests that
//! need the server's process in hand or the exact messages on the wire: the initialize-based
//! protocol (2025-11-25) or the stateless one (2026-07-28, every request carrying `_meta`).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::Home;

pub struct RawMcp {
    pub server: Child,
    stdin: Option<ChildStdin>,
    /// The lines the server writes, read as they come (so a wait for one can give up).
    lines: Receiver<String>,
    next_id: u64,
    /// The `_meta` every request carries on the stateless protocol; `None` on the other.
    meta: Option<Value>,
}

/// What the Python SDK puts in every request's `_meta` on protocol 2026-07-28.
pub fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "faults", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

impl RawMcp {
    /// Start `agentctl mcp FLAGS…` on `h` (in a process group of its own) and initialize.
    pub fn start(h: &Home, flags: &[&str]) -> RawMcp {
        let mut mcp = RawMcp::spawn(h, flags);
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "faults", "version": "0"}});
        mcp.request("initialize", init);
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    /// Start `agentctl mcp FLAGS…` on `h` for the stateless protocol (2026-07-28): no
    /// handshake, `_meta` in every request.
    pub fn start_2026(h: &Home, flags: &[&str]) -> RawMcp {
        let mut mcp = RawMcp::spawn(h, flags);
        mcp.meta = Some(meta_2026());
        mcp
    }

    /// Start `agentctl mcp FLAGS…` on `h` and send nothing yet.
    pub fn spawn(h: &Home, flags: &[&str]) -> RawMcp {
        RawMcp::spawn_cmd(h.cmd(), flags)
    }

    /// `spawn`, with `cmd` as the agentctl to run (another binary, another environment).
    pub fn spawn_cmd(mut cmd: std::process::Command, flags: &[&str]) -> RawMcp {
        let mut server =
            cmd.arg("mcp").args(flags).stdin(Stdio::piped()).stdout(Stdio::piped()).process_group(0).spawn().unwrap();
        let stdin = server.stdin.take();
        let stdout = BufReader::new(server.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(std::result::Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        RawMcp { server, stdin, lines, next_id: 0, meta: None }
    }

    /// Write one message.
    pub fn send(&mut self, msg: &Value) {
        self.send_line(&msg.to_string());
    }

    /// Write one line, whatever it holds.
    pub fn send_line(&mut self, line: &str) {
        writeln!(self.stdin.as_mut().expect("stdin is open"), "{line}").unwrap();
    }

    /// Read the next message the server writes (`None` once it closed stdout).
    pub fn receive(&mut self) -> Option<Value> {
        let line = self.lines.recv().ok()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    }

    /// The next message the server writes, failing the test if none comes within `limit` (a
    /// hang guard) while the server lives on.
    pub fn receive_within(&mut self, limit: Duration) -> Value {
        match self.lines.recv_timeout(limit) {
            Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")),
            Err(e) => panic!("no message from the server within {limit:?} ({e}); alive: {:?}", self.server.try_wait()),
        }
    }

    /// Send a request and return its response (this client sends one at a time).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let mut params = params;
        if let Some(meta) = &self.meta {
            params.as_object_mut().expect("params are an object").insert("_meta".into(), meta.clone());
        }
        let msg = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        self.send(&msg);
        let reply = self.receive().expect("the server answered");
        assert_eq!(reply["id"], self.next_id, "{reply}");
        reply
    }

    /// Call a tool and return its result.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))["result"].clone()
    }

    /// Close the server's stdin and return its exit code once it has exited.
    /// Read a task's whole log (or with `summary`, its whole answer) through `logs`, page after
    /// page from `offset` and `column` as each page says, checking that every result fits the
    /// `budget`; the lines, and how many calls it took.
    pub fn read_all(&mut self, token: &str, summary: bool, budget: usize) -> (Vec<String>, usize) {
        let (mut lines, mut calls) = (Vec::<String>::new(), 0);
        let (mut offset, mut column) = (0u64, 0u64);
        loop {
            let r = self.call("logs", json!({"token": token, "summary": summary, "offset": offset, "column": column}));
            calls += 1;
            let size = r["structuredContent"].to_string().len() + r["content"][0]["text"].as_str().unwrap().len();
            assert!(size <= budget, "a logs result of {size} bytes: {r}");
            let s = &r["structuredContent"];
            assert_eq!(s["offset"].as_u64(), Some(offset), "{s}");
            for (i, l) in s["lines"].as_array().unwrap().iter().enumerate() {
                let l = l.as_str().unwrap();
                // A page that begins inside a line goes on with it.
                if i == 0 && column > 0 { lines.last_mut().unwrap().push_str(l) } else { lines.push(l.to_owned()) }
            }
            let Some(next) = s["next_offset"].as_u64() else { return (lines, calls) };
            column = s["next_column"].as_u64().unwrap_or(0);
            assert!(next > offset || column > 0, "the page moved on: {s}");
            offset = next;
        }
    }

    pub fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        self.server.wait().unwrap().code()
    }
}
