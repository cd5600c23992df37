//! Summarize one log file and report how long it took and the process's peak memory, as JSON.
//! Used by scripts/bench (figure 6): `summarize FILE`.

use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: summarize FILE");
    let mut file = std::fs::File::open(&path).expect("cannot open the log");
    let t = Instant::now();
    let summary = agentctl::agent::summarize(&mut file, agentctl::summary::DEFAULT_CAP, &Default::default())
        .expect("cannot read the log");
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    // SAFETY: getrusage fills the struct it is given.
    let peak_kib = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage.ru_maxrss
    };
    println!("{}", serde_json::json!({"ms": ms, "peak_rss_kib": peak_kib, "summary_bytes": summary.len()}));
}
