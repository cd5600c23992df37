//! A real CLI run as an agentctl task of a fresh home: launched, awaited, and what agentctl and
//! the CLI's own log say of it (the usage and acceptance tests share these).

use serde_json::Value;

use crate::clis::Cli;
use crate::common::{Home, check};

/// One CLI's task in its own home.
pub struct Task {
    pub home: Home,
    pub token: String,
}

impl Task {
    /// `run --sync [FLAGS…] -- CLI…` in a fresh home, which exits `code`; the task and its result.
    pub fn run_sync(cli: &Cli, flags: &[&str], code: i32) -> (Task, Value) {
        Task::run_in(Home::new(), cli, "--sync", flags, code)
    }

    /// `run --async [FLAGS…] -- CLI…` in `home`; the task and the launch's result.
    pub fn run_async(home: Home, cli: &Cli, flags: &[&str]) -> (Task, Value) {
        Task::run_in(home, cli, "--async", flags, 0)
    }

    /// `run MODE [FLAGS…] -- CLI…` in `home`, which exits `code`; the task and its result.
    pub fn run_in(home: Home, cli: &Cli, mode: &str, flags: &[&str], code: i32) -> (Task, Value) {
        // A hang guard: a CLI that retries a failing API for ever ends as expired.
        let args: Vec<&str> = ["--json", "run", mode, "--timeout", "5m"]
            .into_iter()
            .chain(flags.iter().copied())
            .chain(["--"])
            .chain(cli.argv.iter().map(String::as_str))
            .collect();
        let v = check(&args, cli.agentctl(&home, &args).output().unwrap(), code).json();
        let token = v["token"].as_str().unwrap_or_else(|| panic!("no token: {v}")).to_owned();
        (Task { home, token }, v)
    }

    /// `status --json` of the task.
    pub fn status(&self) -> Value {
        self.home.status(&self.token)
    }

    /// The task's whole log as it is now.
    pub fn log(&self, status: &Value) -> String {
        std::fs::read_to_string(status["log_path"].as_str().unwrap()).unwrap()
    }
}

/// The JSON lines of a log (the CLI's stream; its stderr's other lines are skipped).
pub fn events(log: &str) -> Vec<Value> {
    log.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(Value::is_object).collect()
}

/// The one event of `kind` in `events`.
pub fn only<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<_> = events.iter().filter(|e| e["type"] == kind).collect();
    let [one] = found.as_slice() else { panic!("one {kind} event wanted, {} found: {events:?}", found.len()) };
    one
}

/// A usage's token counts: input, output, cache read, cache write.
pub fn tokens(usage: &Value) -> [Option<u64>; 4] {
    ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"].map(|k| usage[k].as_u64())
}
