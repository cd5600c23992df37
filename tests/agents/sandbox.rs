//! Claude Code and Codex in a sandbox: the worktree, the CLI's config and a temp directory
//! writable, the fake model API the only address it reaches, a memory limit; each completes its
//! task (Codex with its tools in agentctl's sandbox, its own cannot start inside), and a halt
//! of Claude mid-tool leaves nothing running.

use std::path::Path;
use std::time::Duration;

use crate::clis::{self, Cli};
use crate::common::{Home, wait_until};
use crate::fake_api::FakeApi;
use crate::task::Task;

/// `cli` against `api` in a git repository, and a home whose profile `api` lets it write its
/// worktree, a temp directory and `config` of its HOME, and reach only the fake API, in pool
/// `fenced` (a memory limit).
fn sandboxed(mut cli: Cli, api: &FakeApi, config: &[&str]) -> (Cli, Home) {
    let work = cli.work();
    for args in [
        &["init", "-q"][..],
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"],
    ] {
        assert!(std::process::Command::new("git").args(args).current_dir(&work).status().unwrap().success());
    }
    let (home, tmp) = (cli.home(), cli.dir().join("tmp"));
    for path in config.iter().map(|c| home.join(c)) {
        match path.extension() {
            Some(_) => std::fs::write(&path, "{}").unwrap(),
            None => std::fs::create_dir_all(&path).unwrap(),
        }
    }
    std::fs::create_dir_all(&tmp).unwrap();
    let config: Vec<String> = config.iter().map(|c| format!("\"~/{c}\", ")).collect();
    cli.env.push(("TMPDIR".into(), tmp.display().to_string()));
    let port = api.base().rsplit(':').next().unwrap().to_owned();
    let h = Home::new();
    h.init();
    let names: Vec<String> = cli.env.iter().map(|(k, _)| format!("\"{k}\"")).collect();
    let toml = format!(
        "[sandboxes.api]\nwrite = [\"{{cwd}}\", {config}\"{tmp}\"]\n\
         network = [\"127.0.0.1:{port}\"]\nenv = [{names}]\n\n[pools.fenced]\nmemory = \"2G\"\n",
        tmp = tmp.display(),
        config = config.concat(),
        names = names.join(", ")
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    (cli, h)
}

const FLAGS: [&str; 5] = ["--sandbox", "api", "--pool", "fenced", "--worktree"];

const CLAUDE: [&str; 2] = [".claude", ".claude.json"];

#[test]
fn claude_completes_its_task_in_a_sandbox_reaching_only_its_api() {
    let api = FakeApi::start("streams.json");
    completes(sandboxed(clis::claude(&api), &api, &CLAUDE), &api);
}

#[test]
fn codex_completes_its_task_in_a_sandbox_its_tools_in_agentctls() {
    let api = FakeApi::start("streams.json");
    let (cli, home) = sandboxed(clis::codex(&api), &api, &[".codex"]);
    let log = completes((cli, home), &api);
    // Its shell step ran (in its own sandbox it could not have).
    assert!(log.contains(r#""aggregated_output":"step one\n""#), "{log}");
}

/// Run `cli` in its sandbox to its end, which must be complete and as the script says: its log.
fn completes((cli, home): (Cli, Home), api: &FakeApi) -> String {
    let (task, v) = Task::run_in(home, &cli, "--sync", &FLAGS, 0);
    let log = task.log(&v);
    assert_eq!(v["status"], "completed", "{v}\nlog:\n{log}\nrequests:\n{}", api.requests());
    assert_eq!(api.turns(), [0, 1, 2], "requests:\n{}\nlog:\n{log}", api.requests());
    // Its write went to its worktree, nowhere else.
    let st = task.status();
    let worktree = Path::new(st["worktree"].as_str().unwrap_or_else(|| panic!("no worktree: {st}")));
    assert_eq!(std::fs::read_to_string(worktree.join("notes.txt")).unwrap(), "step two\n");
    assert!(!cli.work().join("notes.txt").exists());
    assert_eq!(st["sandbox"]["name"], "api", "{st}");
    assert_eq!(st["sandbox"]["network"], serde_json::json!([api.base().trim_start_matches("http://")]), "{st}");
    if st["containment"]["cgroup"].is_object() {
        assert_eq!(st["containment"]["limits"]["memory_bytes"], 2u64 << 30, "{st}");
    }
    assert!(v["note"].is_null(), "the sandbox refused it something: {v}\nlog:\n{log}");
    log
}

#[test]
fn a_halt_of_claude_mid_tool_in_its_sandbox_leaves_nothing() {
    let api = FakeApi::start("steer.json");
    let (cli, home) = sandboxed(clis::claude(&api), &api, &CLAUDE);
    let (task, _) = Task::run_in(home, &cli, "--async", &FLAGS, 0);
    // Its shell tool's `sleep 20` under way.
    wait_until(Duration::from_secs(60), "claude's tool call", || {
        task.status()["step"].to_string().contains("sleep 20")
    });
    let st = task.status();
    let cgroup = st["containment"]["cgroup"]["path"].as_str().map(str::to_owned);
    let v = task.home.run(&["--json", "halt", &task.token], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    if let Some(cgroup) = cgroup {
        assert!(!Path::new(&cgroup).exists(), "{cgroup} is still there");
    }
    assert_eq!(task.status()["processes"], serde_json::Value::Null);
}

#[test]
fn claude_in_a_sandbox_goes_on_with_its_conversation_its_own_state_writable() {
    let api = FakeApi::start("streams.json");
    // The profile names nothing of Claude Code's: agentctl lets it keep its conversation.
    let (cli, home) = sandboxed(clis::claude(&api), &api, &[]);
    let command: Vec<String> =
        cli.argv.iter().map(|a| if a == clis::PROMPT { "{question}".to_owned() } else { a.clone() }).collect();
    let toml = std::fs::read_to_string(home.path().join("agents.toml")).unwrap();
    let rev = format!("\n[agents.rev]\ncommand = {}\nsandbox = \"api\"\n", serde_json::to_string(&command).unwrap());
    std::fs::write(home.path().join("agents.toml"), toml + &rev).unwrap();
    let ask = |args: &[&str]| {
        let args: Vec<&str> = ["--json", "ask", "--sync"].iter().chain(args).copied().collect();
        crate::common::check(&args, cli.agentctl(&home, &args).output().unwrap(), 0).json()
    };
    let first = ask(&["--timeout", "5m", "rev", clis::PROMPT]);
    assert_eq!(first["status"], "completed", "{first}");
    let token = first["token"].as_str().unwrap().to_owned();
    let st = home.status(&token);
    let claude_dir = std::fs::canonicalize(cli.home().join(".claude")).unwrap();
    assert!(st["sandbox"]["write"].as_array().unwrap().contains(&claude_dir.to_str().unwrap().into()), "{st}");
    let second = ask(&["--to", &token, "Now summarise it"]);
    assert_eq!((second["status"].as_str(), second["turn"].as_u64()), (Some("completed"), Some(2)), "{second}");
    let requests = api.requests();
    let resumed = requests
        .lines()
        .filter(|l| l.trim_start().starts_with("conversation:"))
        .find(|l| l.contains("Now summarise it"));
    assert!(resumed.is_some_and(|l| l.contains(clis::PROMPT)), "not the same conversation:\n{requests}");
}
