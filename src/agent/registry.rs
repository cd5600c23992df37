//! The registry of agent kinds: the module of each kind, which one a template's `result`
//! setting chooses, and the answer it finds in a log.

use std::io::{self, Read, Seek};

use super::{Agent, AgentKind, claude, codex, copilot, gemini, generic, json, kiro, opencode};
use crate::summary::read_answer;
use crate::task::ResultFrom;

/// The module of kind `k`: every kind is named here, so a new one does not compile until it
/// has one.
pub fn kind(k: AgentKind) -> Box<dyn Agent> {
    match k {
        AgentKind::Claude => Box::new(claude::Claude),
        AgentKind::Codex => Box::new(codex::Codex),
        AgentKind::Gemini => Box::new(gemini::Gemini),
        AgentKind::Copilot => Box::new(copilot::Copilot),
        AgentKind::Opencode => Box::new(opencode::Opencode),
        AgentKind::Kiro => Box::new(kiro::Kiro),
        AgentKind::Generic => Box::new(generic::Generic),
    }
}

/// The kind a template's `result` setting chooses (see `ResultFrom`): every setting is named
/// here, so a new one does not compile until it chooses a kind. A JSON field a kind knows is
/// that kind's; any other is the JSON agent's.
pub fn of(result: &ResultFrom) -> Box<dyn Agent> {
    match result {
        ResultFrom::LastResponse => Box::new(kiro::Kiro),
        ResultFrom::Json(f) if f == claude::FIELD => Box::new(claude::Claude),
        ResultFrom::Json(f) if f == gemini::FIELD => Box::new(gemini::Gemini),
        ResultFrom::Json(f) => Box::new(json::Json { field: f.clone() }),
        ResultFrom::File => Box::new(codex::Codex),
        // A command agentctl knows nothing more of: its answer is its output.
        ResultFrom::Output => Box::new(generic::Generic),
        // The kind's own reading of its output.
        ResultFrom::Agent(k) => kind(*k),
    }
}

/// The answer the kind `result` chooses finds in the log read from `src` (its end only), at
/// most `cap` bytes of it.
pub fn summarize<R: Read + Seek>(src: &mut R, cap: usize, result: &ResultFrom) -> io::Result<String> {
    let kind = of(result);
    read_answer(src, cap, |tail| kind.answer(tail))
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, SeekFrom};

    use super::*;
    use crate::summary::{DEFAULT_CAP, FIRST_WINDOW, MAX_WINDOW};

    const KIRO: ResultFrom = ResultFrom::LastResponse;
    /// kiro-cli's response marker, as its terminal library writes it.
    const MARK: &str = "\x1b[38;5;10m> \x1b[0m";

    fn sum(log: &[u8]) -> String {
        summarize(&mut Cursor::new(log.to_vec()), DEFAULT_CAP, &KIRO).unwrap()
    }

    #[test]
    fn each_result_setting_chooses_its_kind() {
        let cases = [
            (ResultFrom::LastResponse, "kiro", false),
            (ResultFrom::Json("result".into()), "claude", false),
            (ResultFrom::Json("response".into()), "gemini", false),
            (ResultFrom::File, "codex", true),
            (ResultFrom::Json("message.text".into()), "json", false),
            (ResultFrom::Output, "generic", false),
            (ResultFrom::Agent(AgentKind::Opencode), "opencode", false),
        ];
        for (setting, name, in_file) in cases {
            let kind = of(&setting);
            assert_eq!((kind.name(), kind.answer_in_file()), (name, in_file), "{setting:?}");
        }
    }

    #[test]
    fn each_result_setting_finds_its_answer() {
        let log =
            b"progress 1\n\x1b[31mwarning\x1b[0m on stderr\n{\"type\":\"result\",\"result\":\"the answer\\n> kept\\r\\n\\u001b[1mclean\\u001b[0m\"}\n";
        let of = |from: ResultFrom| summarize(&mut Cursor::new(log.to_vec()), DEFAULT_CAP, &from).unwrap();
        assert_eq!(of(ResultFrom::Json("result".into())), "the answer\n> kept\nclean");
        assert!(of(ResultFrom::Output).starts_with("progress 1\nwarning on stderr\n{"));
        // No such field: the output stands in.
        assert_eq!(of(ResultFrom::Json("response".into())), of(ResultFrom::Output));
    }

    #[test]
    fn marker_far_back_beyond_the_first_window_is_found() {
        let mut log = b"> old\n".to_vec();
        log.extend_from_slice(b"\x1b[0m".repeat(200_000).as_slice());
        log.extend_from_slice(b"\n> the answer\n");
        log.extend_from_slice(b"\x1b[0m".repeat(100_000).as_slice());
        log.push(b'\n');
        assert_eq!(sum(&log), "the answer");
    }

    #[test]
    fn a_window_that_begins_exactly_at_a_marker_line_keeps_it() {
        // Put the last marker line right at the start of the first window.
        let mut tail = format!("> answer\n{}", "y\n".repeat((FIRST_WINDOW as usize - 9) / 2));
        while tail.len() < FIRST_WINDOW as usize {
            tail.push('\n');
        }
        let mut log = format!("> earlier\n{}\n", "z".repeat(1000)).into_bytes();
        log.extend_from_slice(tail.as_bytes());
        let s = summarize(&mut Cursor::new(log), usize::MAX / 2, &KIRO).unwrap();
        assert!(s.starts_with("answer\ny"), "{}", &s[..20]);
    }

    /// Counts the bytes a summary reads.
    struct Counting<R> {
        inner: R,
        read: u64,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }

    impl<R: Seek> Seek for Counting<R> {
        fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    #[test]
    fn a_one_gib_log_is_summarized_from_its_end_only() {
        use std::io::Write;
        let mut f = tempfile::tempfile().unwrap();
        f.set_len(1 << 30).unwrap(); // sparse: a GiB of NULs without using the disk
        f.seek(SeekFrom::End(0)).unwrap();
        f.write_all(format!("\n{MARK}the last response\n").as_bytes()).unwrap();
        for i in 0..20_000 {
            writeln!(f, "\x1b[32mline {i}\x1b[0m of a long answer").unwrap();
        }
        let mut src = Counting { inner: f, read: 0 };
        let cap = 64 * 1024;
        let s = summarize(&mut src, cap, &KIRO).unwrap();
        assert!(s.starts_with("[agentctl: summary truncated"), "{}", &s[..60]);
        assert!(s.ends_with("line 19999 of a long answer"));
        assert!(s.len() <= cap + 100 && !s.contains('\x1b'));
        assert!(src.read <= MAX_WINDOW + 1, "read {} bytes of a 1 GiB log", src.read);

        // A short last response is found in the first window.
        let short = |marker: &str| {
            let mut f = tempfile::tempfile().unwrap();
            f.set_len(1 << 30).unwrap();
            f.seek(SeekFrom::End(0)).unwrap();
            f.write_all(format!("\n{marker}short answer\n").as_bytes()).unwrap();
            let mut src = Counting { inner: f, read: 0 };
            let s = summarize(&mut src, DEFAULT_CAP, &KIRO).unwrap();
            (s, src.read)
        };
        let (s, read) = short(MARK);
        assert_eq!(s, "short answer");
        assert!(read <= FIRST_WINDOW + 1, "read {read} bytes");
        // A plain marker might be a quote inside a longer answer: the search goes on, bounded.
        let (s, read) = short("> ");
        assert_eq!(s, "short answer");
        assert!(read <= MAX_WINDOW + 1, "read {read} bytes");
    }

    #[test]
    fn a_line_longer_than_the_widest_window_keeps_its_end() {
        for ending in ["", "\n"] {
            let mut log = b"> earlier answer\n".to_vec();
            log.extend(std::iter::repeat_n(b'x', MAX_WINDOW as usize + 1000));
            log.extend_from_slice(b" the end of a very long line");
            log.extend_from_slice(ending.as_bytes());
            let s = sum(&log);
            assert!(s.starts_with("[agentctl: summary truncated"), "{ending:?}: {}", &s[..s.len().min(80)]);
            assert!(s.ends_with("the end of a very long line"), "{ending:?}");
            assert!(s.len() <= DEFAULT_CAP + 100);
        }
    }
}
