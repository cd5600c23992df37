//! The window on a log: rows the same forwards and backwards, anchored while output comes,
//! every line reachable, and reads bounded by what is shown or new.

use std::io::Write;

use super::{BLOCK, LogScroll, Move, TEXT_BYTES};

/// A log file in a temp dir of its own.
struct Log {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl Log {
    fn new() -> Log {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task.log");
        Log { _dir: dir, path }
    }

    fn append(&self, bytes: &[u8]) {
        std::fs::OpenOptions::new().create(true).append(true).open(&self.path).unwrap().write_all(bytes).unwrap();
    }
}

fn numbered(from: u64, to: u64) -> Vec<u8> {
    (from..=to).flat_map(|i| format!("line {i}\n").into_bytes()).collect()
}

fn starts(s: &LogScroll) -> Vec<u64> {
    s.rows.iter().map(|r| r.start).collect()
}

/// The rows' starts by the rule itself, read forwards over the whole text.
fn rule(text: &[u8]) -> Vec<u64> {
    let (mut out, mut start, len) = (Vec::new(), 0u64, text.len() as u64);
    while start < len {
        out.push(start);
        let cut = (start + 2 * BLOCK - 1) / BLOCK * BLOCK;
        let until = (cut + 1).min(len);
        start = match memchr::memchr(b'\n', &text[start as usize..until as usize]) {
            Some(i) => start + i as u64 + 1,
            None if cut < len => cut,
            None => len,
        };
    }
    out
}

#[test]
fn rows_are_the_same_paged_down_from_the_first_and_up_from_the_end() {
    // Lines of every length, some many blocks long, a newline right at a cut, no last newline.
    let mut text = Vec::new();
    let mut seed = 7u64;
    for _ in 0..60 {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let len = match seed >> 60 {
            0..=9 => (seed >> 40) % 100,
            10..=13 => (seed >> 20) % (3 * BLOCK),
            _ => 5 * BLOCK + 17,
        };
        text.extend(std::iter::repeat_n(b'a' + (seed % 26) as u8, len as usize));
        text.push(b'\n');
    }
    // A line more than a block long whose newline falls on a cut.
    let at_cut = (text.len() as u64 / BLOCK + 2) * BLOCK;
    text.resize(at_cut as usize, b'y');
    text.extend_from_slice(b"\nlast line without a newline");
    let log = Log::new();
    log.append(&text);
    let want = rule(&text);
    let mut s = LogScroll::new(&log.path);
    s.refresh(4).unwrap();
    s.go(Move::First).unwrap();
    let mut down = std::collections::BTreeSet::new();
    loop {
        down.extend(starts(&s));
        if s.following() {
            break;
        }
        s.go(Move::PageDown).unwrap();
    }
    assert_eq!(down.into_iter().collect::<Vec<_>>(), want);
    let mut up = std::collections::BTreeSet::new();
    loop {
        up.extend(starts(&s));
        if starts(&s)[0] == 0 {
            break;
        }
        s.go(Move::PageUp).unwrap();
    }
    assert_eq!(up.into_iter().collect::<Vec<_>>(), want);
    // A row cut from a longer line says so, and a row holds a screen's width, not a block.
    assert!(s.lines().iter().any(|l| l.starts_with('…')));
    assert!(s.lines().iter().all(|l| l.chars().count() <= super::TEXT_CHARS + 1));
}

#[test]
fn scrolled_back_the_rows_stay_while_output_comes_and_page_up_reaches_the_first_line() {
    let log = Log::new();
    log.append(&numbered(1, 300_000));
    let mut s = LogScroll::new(&log.path);
    s.refresh(20).unwrap();
    assert_eq!(s.lines()[0], "line 299981");
    for _ in 0..300 {
        s.go(Move::PageUp).unwrap();
    }
    // 19 rows a page: one stays in sight.
    let shown = s.lines();
    assert_eq!((shown.len(), shown[0].as_str(), s.following()), (20, "line 294281", false));
    log.append(&numbered(300_001, 320_000));
    s.refresh(20).unwrap();
    assert_eq!(s.lines(), shown, "the rows shown stay while output comes");
    assert_eq!(s.percent(), 91);
    s.go(Move::Up).unwrap();
    assert_eq!(s.lines()[0], "line 294280");
    s.go(Move::Down).unwrap();
    assert_eq!(s.lines(), shown);
    let mut pages = 0;
    while s.lines()[0] != "line 1" {
        s.go(Move::PageUp).unwrap();
        pages += 1;
        assert!(pages < 320_000 / 19 + 2, "never reached the first line");
    }
    assert_eq!(s.lines()[19], "line 20");
    // The window holds its rows and a few blocks, however long the log.
    assert!(s.rows.len() == 20 && s.blocks.as_ref().unwrap().kept.len() <= super::KEPT);
    s.go(Move::Follow).unwrap();
    assert_eq!((s.lines()[19].as_str(), s.following()), ("line 320000", true));
    log.append(&numbered(320_001, 320_001));
    s.refresh(20).unwrap();
    assert_eq!(s.lines()[19], "line 320001", "following, new output shows");
    // Scrolling down to the end follows again.
    s.go(Move::PageUp).unwrap();
    s.go(Move::PageDown).unwrap();
    assert!(s.following());
    s.go(Move::First).unwrap();
    assert_eq!(s.lines()[0], "line 1");
}

#[test]
fn a_line_without_end_costs_what_is_new_whatever_the_log_holds() {
    let log = Log::new();
    log.append(b"started\n");
    let mut s = LogScroll::new(&log.path);
    s.refresh(20).unwrap();
    let most = |new: u64| new + 2 * BLOCK + 20 * TEXT_BYTES;
    let mb = vec![b'x'; 1 << 20];
    for _ in 0..64 {
        log.append(&mb);
        let before = s.bytes_read();
        s.refresh(20).unwrap();
        let read = s.bytes_read() - before;
        assert!(read <= most(1 << 20), "{read} bytes read for 1 MiB written");
        assert!(s.lines().last().unwrap().starts_with("…xxx"));
    }
    assert!(s.bytes_read() <= 64 * most(1 << 20));
    // So much at once that finding the last rows anew costs less than reading it all.
    log.append(&vec![b'x'; 50 << 20]);
    let before = s.bytes_read();
    s.refresh(20).unwrap();
    assert!(s.bytes_read() - before <= 2 * 20 * BLOCK + 20 * TEXT_BYTES);
    // Nothing new, nothing read.
    let before = s.bytes_read();
    s.refresh(20).unwrap();
    assert_eq!(s.bytes_read(), before);
    // The line ends: it shows, and the first row too, a page at a time.
    log.append(b"\ndone\n");
    s.refresh(20).unwrap();
    assert_eq!(s.lines().last().unwrap(), "done");
    s.go(Move::First).unwrap();
    assert_eq!(&s.lines()[..2], ["started", &"x".repeat(super::TEXT_CHARS)]);
}

#[test]
fn a_log_yet_to_come_an_open_last_line_and_a_log_cut_short() {
    let log = Log::new();
    let mut s = LogScroll::new(&log.path);
    s.refresh(5).unwrap();
    assert!(s.lines().is_empty() && s.following());
    log.append(b"");
    s.refresh(5).unwrap();
    assert!(s.lines().is_empty());
    log.append(b"one\ntw");
    s.refresh(5).unwrap();
    assert_eq!(s.lines(), ["one", "tw"]);
    log.append(b"o\nthree");
    s.refresh(5).unwrap();
    assert_eq!(s.lines(), ["one", "two", "three"]);
    // A view with room for more than the log holds follows it.
    s.go(Move::PageUp).unwrap();
    assert!(s.following());
    std::fs::write(&log.path, "new\n").unwrap();
    s.refresh(5).unwrap();
    assert_eq!(s.lines(), ["new"]);
    s.refresh(1).unwrap();
    assert_eq!(s.lines(), ["new"]);
}
