//! What people expect of a command-line tool: completions (the home's tokens too), a man page,
//! help with examples.

use std::path::Path;
use std::process::Command;

use crate::common::{BIN, Home};

/// What bash completes for the words `line` (the last one being typed), through the script
/// `agentctl completions bash` prints.
fn bash_completes(h: &Home, line: &[&str]) -> Vec<String> {
    let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "source <(\"$AGENTCTL\" completions bash) || exit 3
         COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMP_TYPE=9
         _clap_complete_agentctl agentctl \"${{COMP_WORDS[-1]}}\" \"${{COMP_WORDS[-2]}}\"
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words = words.join(" ")
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .env("AGENTCTL", BIN)
        .env("AGENTCTL_HOME", h.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn bash_completes_commands_options_and_the_homes_tokens() {
    let h = Home::new();
    let a = h.start_script("sleep 30");
    let b = h.start_script("sleep 30");
    assert_eq!(bash_completes(&h, &["agentctl", "sta"]), ["status"]);
    assert_eq!(bash_completes(&h, &["agentctl", "list", "--st"]), ["--status"]);
    let tokens = bash_completes(&h, &["agentctl", "halt", ""]);
    assert!(tokens.contains(&a) && tokens.contains(&b), "{tokens:?}");
    assert_eq!(bash_completes(&h, &["agentctl", "logs", &a[..5]]), std::slice::from_ref(&a));
    assert!(bash_completes(&h, &["agentctl", "completions", ""]).contains(&"zsh".to_owned()));
    for t in [&a, &b] {
        h.run(&["halt", t, "--grace", "0s"], 0);
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let r = h.run(&["completions", shell], 0);
        assert!(r.stdout.contains(BIN), "{shell}: {}", r.stdout);
    }
}

#[test]
fn the_man_page_renders_and_help_shows_examples() {
    let h = Home::new();
    let roff = h.run(&["man"], 0).stdout;
    assert!(roff.starts_with(".ie") && roff.contains(".TH agentctl 1"), "{roff}");
    let mut man = Command::new("man")
        .args(["-l", "-"])
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "80")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("man (man-db) is installed by scripts/test");
    std::io::Write::write_all(man.stdin.as_mut().unwrap(), roff.as_bytes()).unwrap();
    let page = String::from_utf8(man.wait_with_output().unwrap().stdout).unwrap();
    for section in ["NAME", "SYNOPSIS", "SUBCOMMANDS"] {
        assert!(page.contains(section), "{section} missing:\n{page}");
    }
    assert!(page.contains("agentctl-halt"), "{page}");
    for cmd in ["ask", "run", "await", "halt", "list", "status", "logs", "prune", "mcp"] {
        let help = h.run(&[cmd, "--help"], 0).stdout;
        assert!(help.contains("Examples:\n  "), "{cmd} --help has no examples:\n{help}");
        assert!(help.contains("Global options:"), "{cmd} --help mixes global options in:\n{help}");
    }
    let help = h.run(&["status", "--help"], 0).stdout;
    assert!(help.contains("<TOKEN>  The task's token"), "{help}");
}

/// The README's line that installs the man pages, run as a new user would (a fresh HOME, agentctl
/// in ~/.cargo/bin as `scripts/install` puts it): `man` then finds agentctl's page and one for
/// every command that page names.
#[test]
fn the_readmes_man_pages_install_on_a_fresh_home_and_name_only_pages_that_exist() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let line = readme.lines().find(|l| l.starts_with("agentctl man --dir")).expect("README.md installs the man pages");
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join(".cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(BIN, bin.join("agentctl")).unwrap();
    let user = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80")
            .output()
            .unwrap()
    };
    let install = user("bash", &["-c", line]);
    assert!(install.status.success(), "{line}: {}", String::from_utf8_lossy(&install.stderr));
    let page = |name: &str| {
        let out = user("man", &[name]);
        assert!(out.status.success(), "man {name} after `{line}`: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let top = page("agentctl");
    let named: Vec<&str> = top.split_whitespace().filter_map(|w| w.strip_suffix("(1)")).collect();
    for cmd in ["ask", "await", "halt", "list", "status", "logs", "prune", "mcp", "man"] {
        assert!(
            named.contains(&format!("agentctl-{cmd}").as_str()),
            "agentctl(1) does not name agentctl-{cmd}: {named:?}"
        );
    }
    assert!(!named.iter().any(|n| n.ends_with("-help") || n.contains("__")), "{named:?}");
    for name in named {
        let text = page(name);
        assert!(text.contains("NAME") && text.contains(name), "man {name}:\n{text}");
    }
    let ask = page("agentctl-ask");
    assert!(ask.contains("--worktree") && ask.contains("QUESTION"), "{ask}");
}

/// `agentctl ARGS` on a terminal (a pty made by `script`) `columns` wide, with `env` set: what
/// it printed.
fn on_a_terminal(h: &Home, columns: usize, env: &[(&str, &str)], args: &[&str]) -> String {
    // The same environment as every test's agentctl, through `script`, which gives it a pty.
    let c = h.cmd();
    let words: Vec<String> = c
        .get_args()
        .chain(args.iter().map(std::ffi::OsStr::new))
        .map(|a| format!("'{}'", a.to_string_lossy()))
        .collect();
    let mut script = Command::new("script");
    script.args(["-qec", &format!("'{BIN}' {}", words.join(" ")), "/dev/null"]);
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    script.env_remove("NO_COLOR").env("COLUMNS", columns.to_string()).env("TERM", "xterm");
    for (k, v) in env {
        script.env(k, v);
    }
    let out = script.stdin(std::process::Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).replace('\r', "")
}

/// `text` without its colour escapes.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn list_fits_the_terminal_puts_running_tasks_first_and_colours_only_when_asked() {
    let h = Home::new();
    h.run(&["run", "--sync", "--", "true"], 0);
    let long = "echo a command line far longer than any terminal is wide, which goes on and on and on and on";
    let running = h.start_script(&format!("{long}; sleep 30"));
    let shown = on_a_terminal(&h, 80, &[], &["list"]);
    assert!(shown.contains('\x1b'), "no colour on a terminal: {shown:?}");
    let rows: Vec<String> = plain(&shown).lines().map(str::to_owned).collect();
    for row in &rows {
        assert!(row.chars().count() <= 80, "{} columns: {row}", row.chars().count());
    }
    assert!(rows[0].starts_with("TOKEN") && rows[0].contains("START"), "{rows:?}");
    assert!(rows[1].starts_with(&running) && rows[1].ends_with('…'), "the running task comes first: {rows:?}");
    assert!(rows[2].contains("completed"), "{rows:?}");
    let bare = on_a_terminal(&h, 80, &[("NO_COLOR", "1")], &["list"]);
    assert!(!bare.contains('\x1b'), "NO_COLOR: {bare:?}");
    assert!(!on_a_terminal(&h, 80, &[], &["--color", "never", "list"]).contains('\x1b'));
    // Not a terminal: nothing cut, no colour, unless asked.
    let piped = h.run(&["list"], 0).stdout;
    assert!(piped.contains(long) && !piped.contains('\x1b'), "{piped}");
    assert!(h.run(&["--color", "always", "list"], 0).stdout.contains('\x1b'));
    h.run(&["halt", &running, "--grace", "0s"], 0);
}

#[test]
fn a_wait_on_a_terminal_shows_a_spinner_line_and_clears_it() {
    let h = Home::new();
    // Long enough to be drawn (a wait under 0.3 s shows nothing), short for the test.
    let shown = on_a_terminal(&h, 100, &[], &["run", "--sync", "--", "sh", "-c", "echo hello there; sleep 1.5"]);
    assert!(shown.contains("(run) running") && shown.contains("line(s): hello there"), "{shown:?}");
    assert!(shown.contains("\x1b[2K"), "the line is erased before the answer: {shown:?}");
    assert!(plain(&shown).contains("completed"), "{shown:?}");
    // Not with --json.
    let json = on_a_terminal(&h, 100, &[], &["--json", "run", "--sync", "--", "sh", "-c", "echo x; sleep 1"]);
    assert!(!json.contains("running"), "{json:?}");
}

/// `agentctl ARGS… -- sh -c SCRIPT` (a task that waits for a file), interrupted by SIGINT once
/// the CLI listens for it; what it printed, and the file that lets the task end.
fn interrupted(h: &Home, args: &[&str], name: &str) -> (std::process::Output, std::path::PathBuf) {
    let pf = h.path().join(name);
    let script = format!("until [ -e '{}' ]; do sleep 0.05; done; echo '> done'", pf.display());
    let child = h
        .cmd()
        .args(args)
        .args(["--", "sh", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::common::wait_until(std::time::Duration::from_secs(20), "the task to run", || {
        h.run(&["--json", "list", "--status", "running"], 0).json()["count"] == 1
    });
    // Once it listens for SIGINT (bit 2 of the caught signals' mask): before that, the signal
    // would end it the default way.
    let caught = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:")).map(str::trim).unwrap_or("0");
        u64::from_str_radix(mask, 16).is_ok_and(|m| m & (1 << (libc::SIGINT - 1)) != 0)
    };
    crate::common::wait_until(std::time::Duration::from_secs(20), "the CLI to listen for SIGINT", caught);
    // SAFETY: kill on our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    (child.wait_with_output().unwrap(), pf)
}

#[test]
fn ctrl_c_during_a_wait_leaves_the_task_running_and_says_how_to_get_back_to_it() {
    let h = Home::new();
    h.init();
    let (out, go) = interrupted(&h, &["run", "--sync"], "go");
    // It ends by SIGINT itself, as a program Ctrl-C stops does (a shell's loop stops too).
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGINT), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let token = h.run(&["--json", "list"], 0).json()["tasks"][0]["token"].as_str().unwrap().to_owned();
    assert!(stdout.contains("await it: agentctl --home") && stdout.contains(&token), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted; the task keeps running"));
    std::fs::write(&go, "").unwrap();
    let v = h.run(&["--json", "await", &token, "--timeout", "20s"], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    // With --quiet, the token alone still.
    let (out, go) = interrupted(&h, &["run", "-q", "--sync"], "go2");
    assert_eq!(out.status.signal(), Some(libc::SIGINT));
    let token = h.run(&["--json", "list"], 0).json()["tasks"][0]["token"].as_str().unwrap().to_owned();
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{token}\n"));
    std::fs::write(&go, "").unwrap();
    h.run(&["--json", "await", &token, "--timeout", "20s"], 0);
}

#[test]
fn what_the_lead_sent_is_shown_inert_on_a_terminal_and_kept_for_a_script() {
    let h = Home::new();
    let token = h.start(&["sleep", "30"]);
    for _ in 0..2 {
        h.run(&["send", &token, "title\x1b]0;pwned\x07 done"], 0);
    }
    let inside = [("AGENTCTL_TOKEN", token.as_str())];
    let shown = on_a_terminal(&h, 80, &inside, &["inbox"]);
    assert!(shown.contains("title^[]0;pwned^G done") && !shown.contains('\x1b'), "{shown:?}");
    // A script reading it gets the message as it was sent.
    let read = h.cmd().env("AGENTCTL_TOKEN", &token).args(["inbox"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&read.stdout), "title\x1b]0;pwned\x07 done\n");
    h.run(&["halt", &token, "--grace", "0s"], 0);
}
