//! Claude Code in a sandbox: its worktree, its config and a temp directory writable, the fake
//! model API the only address it reaches, a memory limit; it completes its task, and a halt
//! of it mid-tool leaves nothing running.

use std::path::Path;
use std::time::Duration;

use crate::clis::{self, Cli};
use crate::common::{Home, wait_until};
use crate::fake_api::FakeApi;
use crate::task::Task;

/// Claude against `api` in a git repository, and a home whose profile `api` lets it reach only
/// the fake API, in pool `fenced` (a memory limit).
fn sandboxed(api: &FakeApi) -> (Cli, Home) {
    let mut cli = clis::claude(api);
    let work = cli.work();
    for args in [
        &["init", "-q"][..],
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"],
    ] {
        assert!(std::process::Command::new("git").args(args).current_dir(&work).status().unwrap().success());
    }
    let (home, tmp) = (cli.home(), cli.dir().join("tmp"));
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(home.join(".claude.json"), "{}").unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    cli.env.push(("TMPDIR".into(), tmp.display().to_string()));
    let port = api.base().rsplit(':').next().unwrap().to_owned();
    let h = Home::new();
    h.init();
    let names: Vec<String> = cli.env.iter().map(|(k, _)| format!("\"{k}\"")).collect();
    let toml = format!(
        "[sandboxes.api]\nwrite = [\"{{cwd}}\", \"~/.claude\", \"~/.claude.json\", \"{tmp}\"]\n\
         network = [\"127.0.0.1:{port}\"]\nenv = [{names}]\n\n[pools.fenced]\nmemory = \"2G\"\n",
        tmp = tmp.display(),
        names = names.join(", ")
    );
    std::fs::write(h.path().join("agents.toml"), toml).unwrap();
    (cli, h)
}

const FLAGS: [&str; 5] = ["--sandbox", "api", "--pool", "fenced", "--worktree"];

#[test]
fn claude_completes_its_task_in_a_sandbox_reaching_only_its_api() {
    let api = FakeApi::start("streams.json");
    let (cli, home) = sandboxed(&api);
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
}

#[test]
fn a_halt_of_claude_mid_tool_in_its_sandbox_leaves_nothing() {
    let api = FakeApi::start("steer.json");
    let (cli, home) = sandboxed(&api);
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
