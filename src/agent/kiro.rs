//! kiro-cli (`kiro-cli chat --no-interactive`, the built-in default template;
//! `result = "last-response"`, the default): its answer is the text after its last response
//! marker (a coloured `> `), without its closing status line; `> ` lines inside the answer
//! (quotes, code) are part of it. Without a marker, its whole output.

use super::{Agent, AgentKind};
use crate::summary::{Found, Line, Tail};

/// kiro-cli.
pub struct Kiro;

impl Agent for Kiro {
    fn kind(&self) -> AgentKind {
        AgentKind::Kiro
    }

    fn answer(&self, tail: &Tail<'_>) -> Found {
        let lines = tail.lines();
        let start = match lines.iter().rposition(|l| l.marked) {
            Some(i) => Some(i),
            // Short of the cap, a marker (or the log's start) may still lie before the window.
            None if tail.short(&lines) => return Found::NeedMore,
            None => plain_marker(&lines),
        };
        let mut texts: Vec<&str> = match start {
            Some(i) => {
                std::iter::once(&lines[i].text[2..]).chain(lines[i + 1..].iter().map(|l| l.text.as_str())).collect()
            }
            None => lines.iter().map(|l| l.text.as_str()).collect(),
        };
        while texts.last().is_some_and(|t| t.trim().is_empty() || is_status(t)) {
            texts.pop();
        }
        // Without a marker and without the log's start, the text is known to exceed the cap.
        tail.answer(&texts.join("\n"), start.is_none() && !tail.whole())
    }
}

/// Without a coloured marker (NO_COLOR, or an agent that prints a plain prompt): the last line
/// that starts with `> ` outside a fenced code block. An answer ends with its fences closed,
/// so a line with an odd number of fence lines after it is inside one.
fn plain_marker(lines: &[Line]) -> Option<usize> {
    let mut fences = 0;
    for (i, l) in lines.iter().enumerate().rev() {
        let t = l.text.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fences += 1;
        } else if fences % 2 == 0 && l.text.starts_with("> ") {
            return Some(i);
        }
    }
    None
}

/// kiro-cli's closing status line, like `▸ Credits: 0.12 • Time: 8s`.
fn is_status(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('▸') && (t.contains("Credits:") || t.contains("Time:"))
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::summary::{DEFAULT_CAP, read_answer};

    /// kiro-cli's response marker, as its terminal library writes it.
    const MARK: &str = "\x1b[38;5;10m> \x1b[0m";

    /// The answer kiro-cli's kind finds in `log`, at most `cap` bytes of it.
    fn answer(log: &[u8], cap: usize) -> String {
        read_answer(&mut Cursor::new(log.to_vec()), cap, |tail| Kiro.answer(tail)).unwrap()
    }

    fn sum(log: &[u8]) -> String {
        answer(log, DEFAULT_CAP)
    }

    #[test]
    fn a_recorded_run_gives_exactly_its_answer() {
        let want = include_str!("../../fixtures/transcripts/kiro.answer").trim_end();
        assert_eq!(sum(include_bytes!("../../fixtures/transcripts/kiro.log")), want);
    }

    #[test]
    fn a_kiro_answer_with_quotes_and_code_is_kept_whole_without_its_status_line() {
        let kiro = |answer: &str| {
            format!(
                "{MARK}Let me look.\n\x1b[38;5;244mRunning tool fs_read\x1b[0m\n> tool output\n\n{MARK}{answer}\n\n \x1b[38;5;8m▸ Credits: 0.31 • Time: 9s\x1b[0m\n\n"
            )
        };
        // Markdown rendering off: the answer as the model wrote it.
        let source = "Review: approve.\n\n> a quoted line\n> another\n\n```sh\ncat <<EOF |\n> line one\nEOF\n```\n\nVerdict: approve.";
        assert_eq!(sum(kiro(source).as_bytes()), source);
        // Rendered as kiro-cli does: quotes drawn with a bar, code in colour without fences.
        let rendered = "Review: approve.\n\n\x1b[38;5;8m│ a quoted line\n\x1b[38;5;8m│ another\x1b[0m\n\n\x1b[1msh\x1b[0m\n\x1b[38;5;10mcat <<EOF |\n> line one\nEOF\n\x1b[0m\n\nVerdict: approve.";
        let shown =
            "Review: approve.\n\n│ a quoted line\n│ another\n\nsh\ncat <<EOF |\n> line one\nEOF\n\n\nVerdict: approve.";
        assert_eq!(sum(kiro(rendered).as_bytes()), shown);
        // Without colour (NO_COLOR): the last `> ` outside a fenced block.
        let plain = "> Let me look.\n> Verdict first.\n```\n> inside\n```\nend\n";
        assert_eq!(sum(plain.as_bytes()), "Verdict first.\n```\n> inside\n```\nend");
    }

    #[test]
    fn summary_is_the_text_after_the_last_marker() {
        let cases: &[(&[u8], &str)] = &[
            (b"> first\nmore\n> second answer\nline two\n", "second answer\nline two"),
            (b"no marker\nat all\n", "no marker\nat all"),
            (b"", ""),
            (b"x\n\x1b[32m> \x1b[0mcoloured\n\n", "coloured"),
            (b"\xe2\xa0\x8b Thinking\r\xe2\xa0\x99 Thinking\r\x1b[K> spun\n", "spun"),
            (b">not a marker\n", ">not a marker"),
            (b"  > indented is not a marker\n", "> indented is not a marker"),
            (b"> last line only", "last line only"),
        ];
        for (log, want) in cases {
            assert_eq!(sum(log), *want, "{:?}", String::from_utf8_lossy(log));
        }
    }

    #[test]
    fn long_summaries_keep_the_end_with_a_note() {
        let mut log = b"> start\n".to_vec();
        for i in 0..20_000 {
            log.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        let s = answer(&log, 1000);
        assert!(s.starts_with("[agentctl: summary truncated"), "{}", &s[..80]);
        assert!(s.ends_with("line 19999"));
        assert!(s.len() < 1100);
    }
}
