//! A log of one enormous line: reading its tail, from the CLI or through MCP, holds a bounded
//! amount of memory whatever the line's length.

use std::io::{Seek, SeekFrom, Write};
use std::process::Stdio;

use serde_json::json;

use crate::common::{Home, fake_agent};
use crate::raw_mcp::RawMcp;

/// The line: 128 MiB of NULs (a sparse file, no disk used), then a little text.
const LINE: u64 = 128 << 20;

/// Peak resident memory, in KiB, of a run of the binary (its own rusage, from wait4).
#[allow(clippy::zombie_processes, reason = "reaped with wait4, for its rusage")]
fn peak_kib(h: &Home, args: &[&str]) -> (i64, String) {
    let child = h.cmd().args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let pid = child.id() as i32;
    let mut stdout = child.stdout.unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut out).unwrap();
        // Only the end matters; the rest is NULs made invisible.
        String::from_utf8_lossy(&out[out.len().saturating_sub(4096)..]).into_owned()
    });
    let mut status = 0;
    // SAFETY: wait4 on our own child, with out-parameters we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::wait4(pid, &mut status, 0, &mut usage), pid);
        usage
    };
    assert_eq!(libc::WEXITSTATUS(status), 0, "agentctl {args:?} failed");
    (usage.ru_maxrss, reader.join().unwrap())
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
