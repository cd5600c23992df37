//! A log of one enormous line: reading its tail, from the CLI or through MCP, holds a bounded
//! amount of memory whatever the line's length.

use std::io::{Seek, SeekFrom, Write};
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common::{Home, fake_agent};
use crate::raw_mcp::RawMcp;

/// The line: 128 MiB of NULs (a sparse file, no disk used), then a little text.
const LINE: u64 = 128 << 20;

/// Peak resident memory, in KiB, of a run of the binary, as GNU time (`/usr/bin/time`) reports
/// it. Not from our own `wait4`: a child spawned from this process starts with this process's
/// high-water mark as its own (the kernel keeps it across `exec`), and this process holds what
/// every test running beside it holds; a child of `time` starts from `time`'s.
fn peak_kib(h: &Home, args: &[&str]) -> (i64, String) {
    let plain = h.cmd();
    let report = h.path().join("peak-kib");
    let mut cmd = Command::new("/usr/bin/time");
    cmd.arg("-o").arg(&report).args(["-f", "%M"]).arg(plain.get_program()).args(plain.get_args()).args(args);
    for (key, value) in plain.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let out = cmd.stderr(Stdio::null()).output().expect("/usr/bin/time (GNU time) runs");
    assert!(out.status.success(), "agentctl {args:?} failed: {:?}", out.status);
    let peak = std::fs::read_to_string(&report).unwrap().trim().parse().unwrap();
    // Only the end matters; the rest is NULs made invisible.
    let end = String::from_utf8_lossy(&out.stdout[out.stdout.len().saturating_sub(4096)..]).into_owned();
    (peak, end)
}

#[test]
fn the_tail_of_an_enormous_line_is_read_in_bounded_memory() {
    let h = Home::new();
    let v = h.run(&["--json", "run", "--", &fake_agent(), "sleep", "0", "short"], 0).json();
    let token = v["token"].as_str().unwrap().to_owned();
    let mut log = std::fs::OpenOptions::new().write(true).open(v["log_path"].as_str().unwrap()).unwrap();
    log.set_len(LINE).unwrap();
    log.seek(SeekFrom::End(0)).unwrap();
    log.write_all(b"\x1b[1mthe end of the line\x1b[0m\n").unwrap();

    let limit = (LINE / 1024 / 4) as i64;
    for args in [vec!["logs", &token, "--tail", "1"], vec!["--json", "logs", &token, "--tail", "1"]] {
        let (peak, end) = peak_kib(&h, &args);
        eprintln!("agentctl {args:?}: peak {peak} KiB");
        assert!(peak < limit, "{args:?} held {peak} KiB for a {} KiB line", LINE / 1024);
        assert!(end.contains("the end of the line"), "{args:?}: {end:?}");
    }

    let mut mcp = RawMcp::start(&h, &[]);
    let page = mcp.call("logs", json!({"token": token, "tail_lines": 1}));
    let s = &page["structuredContent"];
    // NULs show as nothing: the visible end of the line fits one page.
    assert_eq!(s["lines"][0], "the end of the line", "{s}");
    let hwm = std::fs::read_to_string(format!("/proc/{}/status", mcp.server.id())).unwrap();
    let hwm: i64 =
        hwm.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap().trim().trim_end_matches(" kB").parse().unwrap();
    eprintln!("MCP logs: peak {hwm} KiB");
    assert!(hwm < limit, "the MCP server held {hwm} KiB for a {} KiB line", LINE / 1024);
}
