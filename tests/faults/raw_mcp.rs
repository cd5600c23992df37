//! A minimal MCP client speaking raw JSON-RPC to `agentctl mcp` over stdio (initialize-based
//! protocol), for tests that need the server's process in hand.

use std::io::{BufRead, BufReader, Lines, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use serde_json::{Value, json};

use crate::common::Home;

pub struct RawMcp {
    pub server: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl RawMcp {
    /// Start `agentctl mcp FLAGS…` on `h` (in a process group of its own) and initialize.
    pub fn start(h: &Home, flags: &[&str]) -> RawMcp {
        let mut server = h
            .cmd()
            .arg("mcp")
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let stdin = server.stdin.take().unwrap();
        let lines = BufReader::new(server.stdout.take().unwrap()).lines();
        let mut mcp = RawMcp { server, stdin, lines, next_id: 0 };
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "faults", "version": "0"}});
        mcp.request("initialize", init);
        writeln!(mcp.stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
        mcp
    }

    /// Send a request and return its response (this client sends one at a time).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        writeln!(self.stdin, "{msg}").unwrap();
        let reply: Value = serde_json::from_str(&self.lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(reply["id"], self.next_id, "{reply}");
        reply
    }

    /// Call a tool and return its result.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))["result"].clone()
    }
}
