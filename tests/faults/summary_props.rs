//! Summary extraction under hostile logs (issue 5, fault 10): invalid UTF-8, escapes cut at any byte, CR-only
//! progress, NULs, a 10 GiB sparse log. Property tests with random cut points.

use std::io::{Cursor, Read, Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

use agentctl::agent::summarize;
use agentctl::summary::DEFAULT_CAP;

/// xorshift64*: a seeded generator, so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Pieces hostile logs are made of.
const PIECES: &[&[u8]] = &[
    b"\x1b[1;32m",
    b"\x1b[0m",
    b"\x1b]0;title\x07",
    b"\x1b[2K",
    b"\x1b[38;5;141m",
    b"\x1bP+q\x1b\\",
    b"\r",
    b"\r\n",
    b"\n",
    b"\0",
    b"\xff\xfe",
    b"\xe2\x82",
    b"\xe2\xa0\x8b",
    b"> ",
    b">",
    b" ",
    b"text",
    b"50%",
    b"\t",
    "é€".as_bytes(),
];

fn garbage(rng: &mut Rng, pieces: usize) -> Vec<u8> {
    (0..pieces).flat_map(|_| PIECES[rng.below(PIECES.len())].to_vec()).collect()
}

fn sum(log: &[u8]) -> String {
    summarize(&mut Cursor::new(log.to_vec()), DEFAULT_CAP, &Default::default()).unwrap()
}

#[test]
fn whatever_precedes_the_last_marker_the_answer_is_exact() {
    let mut rng = Rng(0x5eed_1234);
    let transcript = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/fake-agent")).unwrap();
    for _ in 0..2000 {
        // A random cut of garbage, or of a real transcript, then the agent's last response.
        let mut log = if rng.below(2) == 0 {
            let n = rng.below(200);
            garbage(&mut rng, n)
        } else {
            transcript[..rng.below(transcript.len())].to_vec()
        };
        let cut = rng.below(log.len() + 1);
        log.truncate(cut);
        log.extend_from_slice(b"\n\x1b[38;5;141m> \x1b[0mthe answer\r\nline \x1b[1mtwo\x1b[0m\n");
        assert_eq!(sum(&log), "the answer\nline two", "log: {:?}", String::from_utf8_lossy(&log));
    }
}

#[test]
fn any_bytes_give_clean_bounded_text() {
    let mut rng = Rng(0xdead_beef);
    for _ in 0..2000 {
        let n = rng.below(400);
        let mut log = garbage(&mut rng, n);
        let cut = rng.below(log.len() + 1);
        log.truncate(cut);
        let s = sum(&log);
        assert!(!s.contains(['\x1b', '\r', '\0']), "unclean: {s:?} from {:?}", String::from_utf8_lossy(&log));
        assert!(s.len() <= DEFAULT_CAP + 100);
    }
    // Progress bars written with CR only collapse to what the terminal shows last.
    assert_eq!(sum(b"> 10%\r20%\r30%\rdone\n"), "done");
}

/// Counts the bytes a summary reads: a bound on its memory and time.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

#[test]
fn a_ten_gib_sparse_log_costs_no_more_than_a_small_one() {
    for tail in [&b"\n> found at the end\n"[..], b"\nno marker anywhere, only NULs before\n"] {
        let mut f = tempfile::tempfile().unwrap();
        f.set_len(10 << 30).unwrap();
        f.seek(SeekFrom::End(0)).unwrap();
        f.write_all(tail).unwrap();
        let mut src = Counting { inner: f, read: 0 };
        let t0 = Instant::now();
        let s = summarize(&mut src, DEFAULT_CAP, &Default::default()).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
        assert!(src.read <= 16 * 1024 * 1024 + 1, "read {} bytes of a 10 GiB log", src.read);
        assert!(!s.contains('\0'));
        assert!(s.ends_with(std::str::from_utf8(tail).unwrap().trim().trim_start_matches("> ")), "{s:?}");
    }
}
