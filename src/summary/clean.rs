//! Pure: raw log bytes -> what a terminal would show, a line (or a piece of a long one) at a
//! time, and whether a line opens with kiro-cli's response marker.

/// Turn one raw log line (no `\n`) into what a terminal would show: the text after the last
/// `\r`, escape sequences removed, tabs kept, invalid UTF-8 replaced.
pub fn clean_line(raw: &[u8]) -> String {
    LineCleaner::default().last(raw)
}

/// `clean_line` for a line too long to hold at once, fed in pieces: each piece is cleaned as
/// a line would be (the text after its last `\r`), and an escape sequence or a UTF-8
/// character cut between two pieces is still recognized. What a `\r` in a later piece would
/// erase of an earlier one stays: the price of bounded memory on lines of megabytes.
#[derive(Default)]
pub struct LineCleaner {
    parser: vte::Parser,
    /// The start of a UTF-8 character the last piece ended inside.
    carry: Vec<u8>,
    /// Keep escape sequences: only make the text valid UTF-8.
    raw: bool,
}

impl LineCleaner {
    /// A cleaner that keeps escape sequences, for raw output.
    pub fn raw() -> LineCleaner {
        LineCleaner { raw: true, ..LineCleaner::default() }
    }

    /// The visible text of the next piece of the line, more of the line to come (a character
    /// it ends inside waits for the next piece).
    pub fn piece(&mut self, raw: &[u8]) -> String {
        let keep = incomplete_tail(raw);
        let text = self.marked_piece(&raw[..raw.len() - keep]).0;
        self.carry.extend_from_slice(&raw[raw.len() - keep..]);
        text
    }

    /// The visible text of the line's last piece.
    pub fn last(&mut self, raw: &[u8]) -> String {
        self.marked_piece(raw).0
    }

    /// `last`, and whether the text opens with a response marker as kiro-cli prints one: `> `
    /// in colour, the colour reset right after it.
    pub(super) fn marked_piece(&mut self, raw: &[u8]) -> (String, bool) {
        let joined;
        let raw = if self.carry.is_empty() {
            raw
        } else {
            let mut carried = std::mem::take(&mut self.carry);
            carried.extend_from_slice(raw);
            joined = carried;
            &joined[..]
        };
        if self.raw {
            return (String::from_utf8_lossy(raw).into_owned(), false);
        }
        let mut end = raw.len();
        while end > 0 && raw[end - 1] == b'\r' {
            end -= 1;
        }
        let line = &raw[..end];
        // Not `memchr`: its first call in a process asks the CPU for its features, which costs
        // a virtual machine ~0.1 ms (12 µs an instruction), and lines are short.
        let visible = match line.iter().rposition(|&b| b == b'\r') {
            Some(i) => &line[i + 1..],
            None => line,
        };
        let mut out = Printable { text: String::with_capacity(visible.len()), coloured: false, marker: Marker::Start };
        self.parser.advance(&mut out, visible);
        (out.text, out.marker == Marker::Confirmed)
    }
}

/// How many bytes at the end of `b` begin a UTF-8 character that does not end there.
fn incomplete_tail(b: &[u8]) -> usize {
    for back in 1..=b.len().min(3) {
        let c = b[b.len() - back];
        if c & 0xc0 == 0x80 {
            continue;
        }
        let len = match c {
            0xf0.. => 4,
            0xe0.. => 3,
            0xc0.. => 2,
            _ => 1,
        };
        return if len > back { back } else { 0 };
    }
    0
}

/// How far a line has gone towards opening with kiro-cli's response marker. Inside a fenced
/// code block kiro prints in the same colour, but never resets it right after a `> `.
#[derive(Clone, Copy, PartialEq)]
enum Marker {
    Start,
    Gt,
    GtSpace,
    Confirmed,
    No,
}

struct Printable {
    text: String,
    coloured: bool,
    marker: Marker,
}

impl vte::Perform for Printable {
    fn print(&mut self, c: char) {
        self.text.push(c);
        self.marker = match (self.marker, c) {
            (Marker::Start, '>') if self.coloured => Marker::Gt,
            (Marker::Gt, ' ') => Marker::GtSpace,
            (Marker::Confirmed, _) => Marker::Confirmed,
            _ => Marker::No,
        };
    }
    fn execute(&mut self, byte: u8) {
        if byte == b'\t' {
            self.text.push('\t');
            if self.marker != Marker::Confirmed {
                self.marker = Marker::No;
            }
        }
    }
    fn csi_dispatch(&mut self, params: &vte::Params, _: &[u8], _: bool, action: char) {
        let mut codes = params.iter().map(|p| p.first().copied().unwrap_or(0));
        let first = params.iter().next().and_then(|p| p.first().copied()).unwrap_or(0);
        // Erasing the line, or going back to its start (a spinner cleared before the answer),
        // leaves what follows as all there is, as a `\r` does.
        if (action == 'K' && first >= 1) || (action == 'G' && first <= 1) {
            self.text.clear();
            self.marker = Marker::Start;
            return;
        }
        if action != 'm' {
            return;
        }
        let mut reset = params.is_empty();
        // In order: `0;32` ends coloured; `38;5;N` and `38;2;R;G;B` carry their own numbers.
        while let Some(code) = codes.next() {
            match code {
                0 => {
                    reset = true;
                    self.coloured = false;
                }
                39 => self.coloured = false,
                30..=37 | 90..=97 => self.coloured = true,
                38 | 48 => {
                    if code == 38 {
                        self.coloured = true;
                    }
                    let skip = match codes.next() {
                        Some(5) => 1,
                        Some(2) => 3,
                        _ => 0,
                    };
                    codes.by_ref().take(skip).for_each(drop);
                }
                _ => {}
            }
        }
        if reset && self.marker == Marker::GtSpace {
            self.marker = Marker::Confirmed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cut_anywhere_into_pieces_cleans_as_the_whole() {
        let line = "xé€😀 \x1b[1mbold\x1b[0m end".as_bytes();
        for cut in 0..=line.len() {
            let mut c = LineCleaner::default();
            let text = c.piece(&line[..cut]) + &c.last(&line[cut..]);
            assert_eq!(text, "xé€😀 bold end", "cut at {cut}");
            let mut r = LineCleaner::raw();
            let text = r.piece(&line[..cut]) + &r.last(&line[cut..]);
            assert_eq!(text.as_bytes(), line, "raw, cut at {cut}");
        }
        // A character never finished ends as it would in a whole line.
        let mut c = LineCleaner::default();
        assert_eq!(c.piece(b"ab\xe2\x82") + &c.last(b""), clean_line(b"ab\xe2\x82"));
    }
}
