//! Sandboxes (`[sandboxes.NAME]`, a template's `[….sandbox]`, `--sandbox`): the agent writes
//! only where its profile says, cannot read what it hides, gets only the variables it lets
//! through and the network it names, and cannot undo any of it; a sandbox this machine cannot
//! make is refused before anything runs.

use std::path::{Path, PathBuf};

use crate::common::Home;

/// A home at `<tmp>/home`, with a project, another project and a user's home beside it.
struct Setup {
    h: Home,
    root: PathBuf,
}

impl Setup {
    fn new(agents_toml: &str) -> Setup {
        let h = Home::under("home");
        let root = h.path().parent().unwrap().to_owned();
        for dir in ["proj", "other", "user/.ssh"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("other/notes.txt"), "theirs\n").unwrap();
        std::fs::write(root.join("user/.bashrc"), "mine\n").unwrap();
        std::fs::write(root.join("user/.ssh/id_ed25519"), "PRIVATE KEY\n").unwrap();
        h.init();
        std::fs::write(h.path().join("agents.toml"), agents_toml).unwrap();
        Setup { h, root }
    }

    fn at(&self, p: &str) -> PathBuf {
        self.root.join(p)
    }

    /// agentctl run in the project, as the user of `user/`, with `args`; asserts exit `code`.
    fn run(&self, args: &[&str], code: i32) -> crate::common::Run {
        let mut cmd = self.h.cmd();
        cmd.current_dir(self.at("proj")).env("HOME", self.at("user")).env("SECRET_VAR", "do not pass");
        crate::common::check(args, cmd.args(args).output().unwrap(), code)
    }

    /// The output of a sandboxed `sh -c script`, its task completed.
    fn sandboxed(&self, profile: &str, script: &str) -> (String, serde_json::Value) {
        let args = ["--json", "run", "--sync", "--sandbox", profile, "--", "sh", "-c", script];
        let v = self.run(&args, 0).json();
        let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
        (log, v)
    }
}

const FENCED: &str = r#"
[sandboxes.fenced]
write = ["{cwd}"]
hide = ["~/.ssh"]
network = "none"
env = ["PATH", "HOME"]
"#;

fn unchanged(path: &Path, was: &str) {
    assert_eq!(std::fs::read_to_string(path).unwrap(), was, "{} changed", path.display());
}

#[test]
fn the_agent_writes_only_in_its_directory_and_the_users_files_stay_as_they_were() {
    let s = Setup::new(FENCED);
    let other = s.at("other");
    let script = format!(
        "echo made > made.txt && echo wrote-cwd
         echo x >> ~/.bashrc || echo refused-bashrc
         echo x > /etc/agentctl-sandbox-test || echo refused-etc
         echo x > {other}/notes.txt || echo refused-other
         ln -s {other}/notes.txt link && echo x > link || echo refused-symlink
         cat ~/.ssh/id_ed25519 || echo refused-ssh
         env | cut -d= -f1 | sort | tr '\\n' ' '",
        other = other.display()
    );
    let (log, v) = s.sandboxed("fenced", &script);
    for says in ["wrote-cwd", "refused-bashrc", "refused-etc", "refused-other", "refused-symlink", "refused-ssh"] {
        assert!(log.contains(says), "{says} missing: {log}");
    }
    assert!(!log.contains("PRIVATE KEY"), "{log}");
    assert_eq!(std::fs::read_to_string(s.at("proj/made.txt")).unwrap(), "made\n");
    unchanged(&s.at("user/.bashrc"), "mine\n");
    unchanged(&s.at("other/notes.txt"), "theirs\n");
    assert!(!Path::new("/etc/agentctl-sandbox-test").exists());
    // Only the listed variables, and agentctl's own.
    let names = log.lines().last().unwrap();
    assert!(names.contains("HOME") && names.contains("PATH") && names.contains("AGENTCTL_TOKEN"), "{names}");
    assert!(!names.contains("SECRET_VAR"), "{names}");
    // Its note says what the sandbox refused, from its output.
    assert!(v["note"].as_str().unwrap_or_default().contains("its sandbox refused it"), "{v}");
    assert!(v["note"].as_str().unwrap_or_default().contains("Read-only file system"), "{v}");
    // `status` says which sandbox it ran in.
    let token = v["token"].as_str().unwrap();
    let st = s.run(&["status", token], 0).stdout;
    assert!(st.contains("sandbox: fenced (writes ") && st.contains("network none"), "{st}");
    let st = s.run(&["--json", "status", token], 0).json();
    assert_eq!(st["sandbox"]["name"], "fenced", "{st}");
    assert_eq!(st["sandbox"]["write"], serde_json::json!([s.at("proj")]), "{st}");
}

#[test]
fn it_cannot_undo_its_sandbox_nor_reach_the_home_nor_its_supervisor() {
    let s = Setup::new(FENCED);
    let home = s.h.path().display().to_string();
    // Another task's log, which it must not touch.
    let other = s.run(&["--json", "run", "--sync", "--", "echo", "theirs"], 0).json();
    let other_log = other["log_path"].as_str().unwrap().to_owned();
    let db_before = std::fs::read(s.h.path().join("agentctl.db")).unwrap();
    // It waits for its supervisor's pid, which the test hands it once it runs.
    let pid_file = s.at("proj/supervisor.pid");
    let script = format!(
        "unshare -U true || echo refused-userns
         unshare -m true || echo refused-unshare
         mount -t tmpfs none /mnt || echo refused-mount
         test -e {home}/agentctl.db || echo no-database
         echo x > {home}/agentctl.db || echo refused-database
         echo x >> {other_log} || echo refused-log
         echo x > /proc/self/root{marker} || echo refused-proc-root
         test -e /proc/1/root{home}/agentctl.db || echo no-database-by-proc
         while ! test -s {pid_file}; do sleep 0.05; done; sup=$(cat {pid_file})
         kill -0 $sup || echo no-supervisor
         python3 -c 'import ctypes, sys; c = ctypes.CDLL(None, use_errno=True); \
             print(\"ptrace\", c.ptrace(16, int(sys.argv[1]), 0, 0), ctypes.get_errno())' $sup
         ls /proc | grep -c '^[0-9]'",
        pid_file = pid_file.display(),
        marker = s.at("other/escaped").display(),
    );
    let v = s.run(&["--json", "run", "--async", "--sandbox", "fenced", "--", "sh", "-c", &script], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    std::fs::write(&pid_file, s.h.supervisor_pid(&token).to_string()).unwrap();
    let v = s.run(&["--json", "await", &token], 0).json();
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    for says in [
        "refused-userns",
        "refused-unshare",
        "refused-mount",
        "no-database",
        "refused-database",
        "refused-log",
        "refused-proc-root",
        "no-database-by-proc",
        "no-supervisor",
    ] {
        assert!(log.contains(says), "{says} missing: {log}");
    }
    // Its supervisor is no process it can name, let alone trace (ESRCH).
    assert!(log.contains("ptrace -1 3"), "{log}");
    // It sees its own processes only.
    let seen: u32 = log.lines().last().unwrap().trim().parse().unwrap();
    assert!(seen < 10, "{seen} processes visible: {log}");
    assert_eq!(std::fs::read(s.h.path().join("agentctl.db")).unwrap().len(), db_before.len());
    assert_eq!(std::fs::read_to_string(&other_log).unwrap(), "theirs\n");
    assert!(!s.at("other/escaped").exists());
}

#[test]
fn network_none_leaves_only_its_own_loopback_and_host_leaves_the_machines() {
    let toml = format!("{FENCED}\n[sandboxes.online]\nwrite = [\"{{cwd}}\"]\nnetwork = \"host\"\n");
    let s = Setup::new(&toml);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo connected || echo no-connection");
    let (log, _) = s.sandboxed("fenced", &probe);
    assert!(log.contains("no-connection") && !log.contains("connected\n"), "{log}");
    // Nor any address beyond (a documentation address: it has no route, not even a slow one).
    let (log, _) = s.sandboxed("fenced", "bash -c 'exec 3<>/dev/tcp/192.0.2.1/80' || echo unreachable");
    assert!(log.contains("Network is unreachable") && log.contains("unreachable\n"), "{log}");
    let (log, _) = s.sandboxed("online", &probe);
    assert!(log.contains("connected"), "{log}");
}

/// A server on this machine's IPv4 loopback that answers each connection with `hello-NAME`,
/// and ` for HOST` if the request said `Host: HOST`: its port.
fn hello_server(name: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut head = [0u8; 1024];
            let n = conn.read(&mut head).unwrap_or(0);
            let head = String::from_utf8_lossy(&head[..n]).into_owned();
            let host = head.lines().find_map(|l| l.strip_prefix("Host: ")).map(|h| format!(" for {h}"));
            let _ =
                conn.write_all(format!("HTTP/1.0 200 OK\r\n\r\nhello-{name}{}", host.unwrap_or_default()).as_bytes());
        }
    });
    port
}

/// What the agent of the allow-list test tries: each line `what: how it went`.
const PROBE: &str = r#"
import os, socket, sys
a, b, c = (int(p) for p in sys.argv[1:4])
proxy = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])

def talk(port, *said, host="127.0.0.1"):
    try:
        s = socket.create_connection((host, port), 10)
        s.settimeout(10)
        got = b""
        for line in said:
            s.sendall(line.encode())
            got += s.recv(4096)
        while (more := s.recv(4096)):
            got += more
        return got.decode().replace("\r\n", " ").strip()
    except OSError as e:
        return f"failed {e.strerror}"

print("direct-listed:", talk(a, "GET / HTTP/1.0\r\n\r\n"))
print("direct-unlisted:", talk(b, "GET / HTTP/1.0\r\n\r\n"))
print("connect-name:", talk(proxy, f"CONNECT localhost:{c} HTTP/1.1\r\n\r\n", "GET / HTTP/1.0\r\n\r\n"))
print("plain-name:", talk(proxy, f"GET http://localhost:{c}/ HTTP/1.1\r\nHost: elsewhere\r\n\r\n"))
# `localhost` inside may be ::1, where the server outside does not listen.
print("localhost-v6:", talk(c, "GET / HTTP/1.0\r\n\r\n", host="::1") if socket.has_ipv6 else "no IPv6")
print("connect-unlisted:", talk(proxy, f"CONNECT 127.0.0.1:{b} HTTP/1.1\r\n\r\n"))
print("connect-elsewhere:", talk(proxy, "CONNECT elsewhere.example:443 HTTP/1.1\r\n\r\n"))
"#;

#[test]
fn an_allow_list_admits_its_hosts_directly_or_through_its_proxy_and_refuses_the_rest() {
    let (a, b, c) = (hello_server("a"), hello_server("b"), hello_server("c"));
    let toml = format!("[sandboxes.listed]\nwrite = [\"{{cwd}}\"]\nnetwork = [\"127.0.0.1:{a}\", \"localhost:{c}\"]\n");
    let s = Setup::new(&toml);
    std::fs::write(s.at("proj/probe.py"), PROBE).unwrap();
    let (log, v) = s.sandboxed("listed", &format!("python3 probe.py {a} {b} {c}"));
    let said = |what: &str| log.lines().find_map(|l| l.strip_prefix(&format!("{what}: "))).unwrap_or_default();
    // Its listed address on this machine's loopback, as it is.
    assert_eq!(said("direct-listed"), "HTTP/1.0 200 OK  hello-a", "{log}");
    assert_eq!(said("direct-unlisted"), "failed Connection refused", "{log}");
    // A listed host, by name, through the proxy: tunnelled, or a plain request.
    assert!(said("connect-name").starts_with("HTTP/1.1 200 Connection established"), "{log}");
    assert!(said("connect-name").ends_with("hello-c"), "{log}");
    // The server is asked for the host the URL names, whatever Host the client wrote.
    assert_eq!(said("plain-name"), format!("HTTP/1.0 200 OK  hello-c for localhost:{c}"), "{log}");
    // A `localhost` entry's ::1 inside reaches a server outside on 127.0.0.1 alone.
    assert_eq!(said("localhost-v6"), "HTTP/1.0 200 OK  hello-c", "{log}");
    // Anything else the proxy refuses, saying why.
    for what in ["connect-unlisted", "connect-elsewhere"] {
        assert!(said(what).starts_with("HTTP/1.1 403 Forbidden"), "{what}: {log}");
        assert!(said(what).contains("its network allow-list is 127.0.0.1:"), "{what}: {log}");
    }
    let note = v["note"].as_str().unwrap_or_default();
    assert!(
        note.contains(&format!("network allow-list refused 2 connection(s), to 127.0.0.1:{b}, elsewhere.example:443")),
        "{v}"
    );
    let st = s.run(&["status", v["token"].as_str().unwrap()], 0).stdout;
    assert!(st.contains(&format!("network 127.0.0.1:{a}, localhost:{c}")), "{st}");
}

#[test]
fn a_template_a_pool_or_the_file_chooses_a_sandbox_and_none_opts_out() {
    let toml = format!(
        "sandbox = \"fenced\"\n{FENCED}\n[agents.builder]\ncommand = [\"sh\", \"-c\", \"echo x > ~/.bashrc || echo refused-inline\"]\n\
         [agents.builder.sandbox]\nwrite = [\"{{cwd}}\"]\n"
    );
    let s = Setup::new(&toml);
    // The file's default.
    let v = s.run(&["--json", "run", "--sync", "--", "sh", "-c", "echo x > ~/.bashrc || echo refused"], 0).json();
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("refused"), "{log}");
    // The template's own table.
    let v = s.run(&["--json", "ask", "builder", "go", "--sync"], 0).json();
    let st = s.run(&["--json", "status", v["token"].as_str().unwrap()], 0).json();
    assert_eq!(st["sandbox"]["name"], "its template's sandbox", "{st}");
    unchanged(&s.at("user/.bashrc"), "mine\n");
    // `--sandbox none`: the user's own choice.
    let v = s.run(&["--json", "run", "--sync", "--sandbox", "none", "--", "sh", "-c", "echo ok > ~/.bashrc"], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    unchanged(&s.at("user/.bashrc"), "ok\n");
}

#[test]
fn a_sandbox_that_cannot_be_made_is_refused_before_anything_runs() {
    let toml = format!(
        "{FENCED}\n[sandboxes.allow]\nnetwork = [\"example.com\"]\n[sandboxes.missing]\nwrite = [\"/no/such/dir\"]\n"
    );
    let s = Setup::new(&toml);
    let marker = s.at("proj/ran");
    let script = format!("touch {}", marker.display());
    for (profile, says) in [
        ("nope", "sandbox `nope` (--sandbox) is not defined (defined: allow, fenced, missing)"),
        ("allow", "network entry `example.com` has no port: write `host:port`"),
        ("missing", "`/no/such/dir` (/no/such/dir) does not exist"),
    ] {
        let r = s.run(&["run", "--sync", "--sandbox", profile, "--", "sh", "-c", &script], 2);
        assert!(r.stderr.contains(says), "{profile}: {}", r.stderr);
    }
    // No bubblewrap: refused, naming it.
    let mut cmd = s.h.cmd();
    cmd.current_dir(s.at("proj")).env("AGENTCTL_BWRAP", "");
    let args = ["run", "--sync", "--sandbox", "fenced", "--", "/bin/touch", marker.to_str().unwrap()];
    let r = crate::common::check(&args, cmd.args(args).output().unwrap(), 2);
    assert!(r.stderr.contains("a sandbox needs bubblewrap (`bwrap`), which is not installed"), "{}", r.stderr);
    assert!(!marker.exists(), "an agent ran");
    // A follow-up runs in its task's sandbox: it cannot choose another.
    let r = s.run(&["ask", "--to", "abc123", "go on", "--sandbox", "none"], 2);
    assert!(r.stderr.contains("leave out the directory, session, timeout, worktree, pool and sandbox"), "{}", r.stderr);
    assert_eq!(s.run(&["--json", "list"], 0).json()["tasks"], serde_json::json!([]));
}

#[test]
fn a_halt_gives_the_agent_its_grace_and_stops_the_whole_sandbox() {
    let s = Setup::new(FENCED);
    let (up, trapped) = (s.at("proj/up"), s.at("proj/trapped"));
    let script = format!(
        "trap 'echo done > {trapped}; exit 0' TERM; sleep 300 & touch {up}; wait",
        trapped = trapped.display(),
        up = up.display()
    );
    let v = s.run(&["--json", "run", "--async", "--sandbox", "fenced", "--", "sh", "-c", &script], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    crate::common::wait_until(std::time::Duration::from_secs(30), "the agent to start", || up.exists());
    let v = s.run(&["--json", "halt", &token, "--grace", "20s"], 0).json();
    assert_eq!(v["status"], "cancelled", "{v}");
    // Its TERM trap ran: the halt's SIGTERM reached it, not bubblewrap's SIGKILL.
    assert_eq!(std::fs::read_to_string(&trapped).unwrap_or_default(), "done\n", "{v}");
    // Nothing of it is left: its cgroup (its bubblewrap, its shell, the sleep) is gone.
    let st = s.run(&["--json", "status", &token], 1).json();
    assert_eq!(st["processes"], serde_json::Value::Null, "{st}");
    if let Some(cgroup) = st["containment"]["cgroup"]["path"].as_str() {
        assert!(!Path::new(cgroup).exists(), "{cgroup} is still there");
    }
}

#[test]
fn it_cannot_reach_a_unix_socket_outside_nor_unhide_a_path_spelled_another_way() {
    // A hidden key under a path written through `..` and a symlink, beside a writable parent.
    let toml = r#"
[sandboxes.tricky]
write = ["{cwd}", "~/../user/keys/../keys"]
hide = ["~/link/secret"]
"#;
    let s = Setup::new(toml);
    std::fs::create_dir_all(s.at("user/keys/secret")).unwrap();
    std::fs::write(s.at("user/keys/secret/key"), "PRIVATE\n").unwrap();
    std::os::unix::fs::symlink(s.at("user/keys"), s.at("user/link")).unwrap();
    let sock = s.at("proj/host.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let script = format!(
        "cat {keys}/secret/key || echo hidden
         python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{sock}\")' 2>/dev/null && echo reached || echo no-socket",
        keys = s.at("user/keys").display(),
        sock = sock.display()
    );
    let (log, _) = s.sandboxed("tricky", &script);
    assert!(log.contains("hidden") && !log.contains("PRIVATE"), "{log}");
    assert!(log.contains("no-socket") && !log.contains("reached"), "{log}");
}

#[test]
fn a_sandboxed_agent_asks_its_lead_posts_and_reads_its_inbox_through_its_supervisor() {
    let s = Setup::new(FENCED);
    let script = "a=$(agentctl ask-lead 'which branch?' --choices main,dev --timeout 60s) && echo \"chose $a\"
                  agentctl notify 'from inside' && agentctl inbox --wait 60s";
    let v = s.run(&["--json", "run", "--async", "--sandbox", "fenced", "--", "sh", "-c", script], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    crate::common::wait_until(std::time::Duration::from_secs(30), "the agent's question", || {
        // Whatever it exits with (starting, running): its question is what is looked for.
        let out = s.h.cmd().args(["--json", "status", &token]).output().unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["pending_question"]["text"] == "which branch?"
    });
    s.run(&["reply", &token, "dev"], 0);
    s.run(&["send", &token, "hello from the lead"], 0);
    let v = s.run(&["--json", "await", &token], 0).json();
    assert_eq!(v["status"], "completed", "{v}");
    let log = std::fs::read_to_string(v["log_path"].as_str().unwrap()).unwrap();
    assert!(log.contains("chose dev") && log.contains("hello from the lead"), "{log}");
    let events = s.run(&["events", "--session", "default"], 0).stdout;
    assert!(events.contains(&format!("{token} (run)")) && events.contains("from inside"), "{events}");
}

#[test]
fn a_question_whose_ask_lead_was_killed_inside_is_withdrawn() {
    let s = Setup::new(FENCED);
    let gave_up = s.at("proj/gave-up");
    let script =
        format!("timeout 1 agentctl ask-lead 'anyone?'; touch {gave_up}; sleep 300", gave_up = gave_up.display());
    let v = s.run(&["--json", "run", "--async", "--sandbox", "fenced", "--", "sh", "-c", &script], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    crate::common::wait_until(std::time::Duration::from_secs(30), "the ask-lead to be killed", || gave_up.exists());
    // Its asker is gone, though its task (and its supervisor) runs on: nobody waits for an answer.
    let out = s.h.cmd().args(["--json", "status", &token]).output().unwrap();
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["status"], "running", "{st}");
    assert_eq!(st["pending_question"], serde_json::Value::Null, "{st}");
    let r = s.run(&["reply", &token, "too late"], 2);
    assert!(r.stderr.contains("has no question waiting"), "{}", r.stderr);
    s.run(&["halt", &token], 0);
}
