//! ask/run: quick answers at once, the hybrid switch, --wait, --async, --sync.

use std::time::{Duration, Instant};

use crate::common::{Home, fake_agent, wait_until};

#[test]
fn a_quick_task_answers_at_once_with_its_summary() {
    let h = Home::new();
    let fake = fake_agent();
    let t0 = Instant::now();
    let r = h.run(&["run", "--", &fake, "sleep", "0.2", "all done here"], 0);
    assert!(t0.elapsed() < Duration::from_secs(8), "should not wait for the 10 s window");
    assert!(r.stdout.contains("completed"), "{}", r.stdout);
    assert!(r.stdout.contains("all done here"), "{}", r.stdout);

    let v = h.run(&["--json", "run", "--", &fake, "sleep", "0.2", "quick"], 0).json();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["summary"], "quick");
    assert_eq!(v["timed_out"], false);
    for field in [
        "token",
        "role",
        "status",
        "exit_code",
        "signal",
        "summary",
        "line_count",
        "timed_out",
        "log_path",
        "summary_path",
        "started_at",
        "ended_at",
        "elapsed_ms",
        "error",
    ] {
        assert!(v.get(field).is_some(), "missing field {field} in {v}");
    }
    assert!(v["elapsed_ms"].as_u64().unwrap() >= 200, "{v}");
}

#[test]
fn a_failing_task_exits_1_with_its_exit_code() {
    let h = Home::new();
    let v = h.run(&["--json", "run", "--", &fake_agent(), "fail", "3"], 1).json();
    assert_eq!(v["status"], "failed");
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["summary"], "something went wrong");
    let r = h.run(&["run", "--", &fake_agent(), "fail", "4"], 1);
    assert!(r.stdout.contains("failed") && r.stdout.contains("exit 4"), "{}", r.stdout);
}

#[test]
fn the_default_ask_hands_back_a_token_after_ten_seconds() {
    let h = Home::new();
    let t0 = Instant::now();
    let r = h.run(&["ask", "reviewer", "sleep 15"], 0);
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_secs(10), "returned after {waited:?}, before the 10 s window");
    // The task runs 15 s: being handed back `running` proves the switch; this is a hang guard.
    assert!(waited < Duration::from_secs(30), "returned after {waited:?}: not handed back at 10 s");
    assert!(r.stdout.contains("running"), "{}", r.stdout);
    let token = r.stdout.split_whitespace().nth(1).unwrap().to_owned();
    assert!(r.stdout.contains(&format!("await {token}")), "no await hint: {}", r.stdout);
    assert!(r.stdout.contains(&format!("halt {token}")), "no halt hint: {}", r.stdout);
    assert_eq!(h.status(&token)["status"], "running");
    h.run(&["halt", &token, "--grace", "1s"], 0);
}

#[test]
fn wait_shortens_the_window_and_async_returns_at_once() {
    let h = Home::new();
    let t0 = Instant::now();
    let v = h.run(&["--json", "ask", "reviewer", "sleep 60", "--wait", "2s"], 0).json();
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_secs(2), "returned after {waited:?}");
    assert!(waited < Duration::from_secs(30), "returned after {waited:?}");
    assert_eq!(v["status"], "running");
    assert!(v["message"].as_str().unwrap().contains("await"), "{v}");
    let slow = v["token"].as_str().unwrap().to_owned();

    let t0 = Instant::now();
    let v = h.run(&["--json", "ask", "--async", "reviewer", "sleep 60"], 0).json();
    // `starting` below is what shows it did not wait (for its agent even); this bound is a
    // hang guard.
    assert!(t0.elapsed() < Duration::from_secs(30), "--async took {:?}", t0.elapsed());
    assert_eq!(v["status"], "starting");
    let token = v["token"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 6);
    for t in [&slow, &token] {
        h.run(&["halt", t, "--grace", "1s"], 0);
    }
}

#[test]
fn quiet_prints_the_token_alone_for_scripts() {
    let h = Home::new();
    let fake = fake_agent();
    // `tok=$(agentctl run -q --async -- …)`: one line, the token, and nothing else.
    let r = h.run(&["run", "-q", "--async", "--", &fake, "sleep", "30"], 0);
    let token = r.stdout.strip_suffix('\n').unwrap_or_else(|| panic!("{:?}", r.stdout));
    assert!(token.len() == 6 && token.chars().all(|c| c.is_ascii_hexdigit()), "{:?}", r.stdout);
    wait_until(Duration::from_secs(60), "the task to run", || h.status(token)["status"] == "running");
    h.run(&["halt", token, "--grace", "0s"], 0);
    // A task that ends within the wait: still the token alone, and the exit says how it ended.
    let r = h.run(&["ask", "--quiet", "reviewer", "Is this fine?"], 0);
    assert_eq!(r.stdout.trim_end().len(), 6, "{:?}", r.stdout);
    let r = h.run(&["run", "-q", "--", &fake, "fail", "3"], 1);
    assert_eq!(h.status(r.stdout.trim_end())["exit_code"], 3);
    let r = h.run(&["--json", "run", "-q", "--", "true"], 2);
    assert!(r.stderr.contains("give one of them"), "{}", r.stderr);
}

#[test]
fn sync_waits_for_the_final_result() {
    let h = Home::new();
    let t0 = Instant::now();
    let v = h.run(&["--json", "run", "--sync", "--", &fake_agent(), "sleep", "1.5", "synced"], 0).json();
    assert!(t0.elapsed() >= Duration::from_millis(1500));
    assert_eq!(v["status"], "completed");
    assert_eq!(v["summary"], "synced");
}

#[test]
fn agent_gets_a_clean_process_state_and_its_environment() {
    let h = Home::new();
    // The launcher itself holds an extra inheritable descriptor (fd 7), as shells often do, and
    // ignores hangups, interrupts and terminations, as under nohup or some CI runners.
    let mut launcher = h.cmd();
    launcher.args(["--json", "run", "--session", "lead", "--", &fake_agent(), "fds"]);
    let extra = std::fs::File::open("/dev/null").unwrap();
    let extra_fd = std::os::fd::AsRawFd::as_raw_fd(&extra);
    // SAFETY: signal and dup2 are async-signal-safe; fd 7 is left open (not CLOEXEC) for the exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut launcher, move || {
            for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGQUIT] {
                libc::signal(sig, libc::SIG_IGN);
            }
            if libc::dup2(extra_fd, 7) == -1 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
        });
    }
    let out = launcher.output().unwrap();
    let v = crate::common::check(&["run", "fds"], out, 0).json();
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("fds: 0 1 2 \n"), "the agent inherited more than stdio: {log}");
    assert!(log.contains("SigBlk:\t0000000000000000"), "{log}");
    assert!(log.contains("SigIgn:\t0000000000000000"), "the agent inherited ignored signals: {log}");

    let r = h.run(&["--json", "run", "--session", "lead", "--", &fake_agent(), "env", "a b", "$(touch x)"], 0);
    let v = r.json();
    let token = v["token"].as_str().unwrap();
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("arg: a b\narg: $(touch x)\n"), "{log}");
    let home = h.path().canonicalize().unwrap();
    assert!(log.contains(&format!("token={token} session=lead home={}", home.display())), "{log}");
    let cwd = std::env::current_dir().unwrap();
    assert!(log.contains(&format!("cwd={}", cwd.display())), "{log}");
}

#[test]
fn stdin_of_the_agent_is_dev_null_and_questions_can_come_from_stdin() {
    let h = Home::new();
    let v = h.run(&["--json", "run", "--", &fake_agent(), "stdin"], 0).json();
    assert_eq!(v["summary"], "stdin held []");

    let mut c = h.cmd();
    c.args(["--json", "ask", "reviewer", "-"]).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"question from stdin").unwrap();
    let out = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["summary"].as_str().unwrap().contains("[reviewer] question from stdin"), "{v}");
}

#[test]
fn an_exec_error_fails_the_task_saying_why_and_a_script_without_shebang_runs_under_sh() {
    use std::os::unix::fs::PermissionsExt;
    let h = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let script = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.to_str().unwrap().to_owned()
    };
    // Executable, so the launcher lets it through; the kernel refuses it (no such interpreter):
    // the task fails at once, saying why.
    let broken = script("broken", "#!/nonexistent/interpreter\necho never\n");
    let r = h.run(&["run", "--", &broken], 1);
    assert!(r.stdout.contains(&format!("cannot run `{broken}`")), "{}", r.stdout);
    assert!(r.stdout.contains("No such file or directory"), "{}", r.stdout);
    let listed = h.run(&["--json", "list"], 0).json();
    assert_eq!(listed["tasks"][0]["status"], "failed", "{listed}");
    // Handed back at once, it says so when awaited.
    let token = h.run(&["run", "-q", "--async", "--", &broken], 0).stdout;
    let v = h.run(&["--json", "await", token.trim()], 1).json();
    assert!(v["error"].as_str().is_some_and(|e| e.contains("No such file or directory")), "{v}");
    // No `#!` line: run by /bin/sh, as a shell (and execvp) would.
    let plain = script("plain", "echo \"> under sh with $1\"\n");
    let v = h.run(&["--json", "run", "--", &plain, "an argument"], 0).json();
    assert_eq!(v["summary"], "under sh with an argument");
}

#[test]
fn usage_errors_say_what_went_wrong_and_what_to_type() {
    let h = Home::new();
    let r = h.run(&["run", "--async", "sleep", "5"], 2);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines[0], "agentctl: error: unexpected argument 'sleep' found", "{}", r.stderr);
    assert!(lines[1].starts_with("hint: the command goes after `--`: agentctl --home "), "{}", r.stderr);
    assert!(lines[1].ends_with(" run --async -- sleep 5"), "{}", r.stderr);
    assert!(lines[2].starts_with("usage: agentctl run"), "{}", r.stderr);
    let r = h.run(&["lst"], 2);
    assert!(r.stderr.starts_with("agentctl: error: unrecognized subcommand 'lst'\nhint: "), "{}", r.stderr);
    assert!(r.stderr.contains("'list'"), "{}", r.stderr);
    let r = h.run(&["ask"], 2);
    assert!(r.stderr.contains("not provided <ROLE>, <QUESTION>"), "{}", r.stderr);
    // The same style for errors agentctl finds itself, and one JSON object with --json.
    let r = h.run(&["status", "zzz"], 2);
    assert!(r.stderr.starts_with("agentctl: error: invalid token `zzz`"), "{}", r.stderr);
    let v = h.run(&["--json", "run", "sleep", "5"], 2).json();
    assert_eq!(v["kind"], "usage", "{v}");
    // A negative number is no value to put after `--` (that would make it the command).
    for (args, hint) in [
        (
            &["run", "--wait", "-5", "--", "true"][..],
            "hint: --wait takes 0 or more, like `--wait 5s`; `-5` is negative",
        ),
        (&["list", "--limit", "-3"][..], "hint: --limit takes 0 or more, like `--limit 5`; `-3` is negative"),
        (
            &["halt", "abcdef", "--grace", "-2s"][..],
            "hint: --grace takes 0 or more, like `--grace 5s`; `-2s` is negative",
        ),
        (
            &["run", "--timeout", "-30m", "--", "true"][..],
            "hint: --timeout takes 0 or more, like `--timeout 5s`; `-30m` is negative",
        ),
    ] {
        let r = h.run(args, 2);
        assert_eq!(r.stderr.lines().nth(1), Some(hint), "{}", r.stderr);
        assert!(!r.stderr.contains("'--"), "{}", r.stderr);
    }
    // A question that starts with `--`: after `--`, or from stdin; not a flag's name.
    let r = h.run(&["ask", "reviewer", "--hello world"], 2);
    let hint = r.stderr.lines().nth(1).unwrap();
    assert!(hint.starts_with("hint: a question that starts with `-` goes after `--`: agentctl --home"), "{hint}");
    assert!(hint.ends_with("ask reviewer -- '--hello world' (or give `-` and pipe it in)"), "{hint}");
    assert!(!r.stderr.contains("similar argument"), "{}", r.stderr);
}
