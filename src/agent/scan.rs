//! Pieces of a JSON event read without parsing it whole: the value after a key, for the ends
//! of a line longer than `stream::LONG` (an event whose answer made it long), and a cheap look
//! at its first bytes.

use serde_json::Value;

/// The JSON value after the first `"key":` in `bytes`, whatever follows it; none if there is
/// no such key or no whole value after it. Inside a JSON string a quote is escaped, so the
/// key is never found in the text of an answer.
pub(super) fn value_after(bytes: &[u8], key: &str) -> Option<Value> {
    let pattern = format!("\"{key}\":");
    let at = memchr::memmem::find(bytes, pattern.as_bytes())? + pattern.len();
    serde_json::Deserializer::from_slice(&bytes[at..]).into_iter::<Value>().next()?.ok()
}

/// A key to look for in events (`"key":`, or any text), its searcher built once.
pub(super) struct Key {
    quoted: &'static str,
    finder: std::sync::OnceLock<memchr::memmem::Finder<'static>>,
}

impl Key {
    /// `quoted` is the key as it is written, `"key":` (or the text looked for).
    pub(super) const fn new(quoted: &'static str) -> Key {
        Key { quoted, finder: std::sync::OnceLock::new() }
    }

    fn finder(&self) -> &memchr::memmem::Finder<'static> {
        self.finder.get_or_init(|| memchr::memmem::Finder::new(self.quoted.as_bytes()))
    }

    /// Where it is first in `bytes`.
    pub(super) fn find(&self, bytes: &[u8]) -> Option<usize> {
        self.finder().find(bytes)
    }

    /// Where it is last in `bytes` (a forward search, which is vectorized where a reverse one
    /// is not).
    pub(super) fn last(&self, bytes: &[u8]) -> Option<usize> {
        self.finder().find_iter(bytes).last()
    }

    /// The key as it is written.
    pub(super) fn quoted(&self) -> &'static [u8] {
        self.quoted.as_bytes()
    }
}

/// The whole-number fields `keys` of the compact JSON object that `bytes` opens with, and the
/// object's length, read in one pass without building a map: a field of another type is
/// none. None if `bytes` does not open with a compact object (the caller parses it instead).
pub(super) fn numbers<const N: usize>(bytes: &[u8], keys: [&[u8]; N]) -> Option<([Option<u64>; N], usize)> {
    let mut out = [None; N];
    let mut rest = bytes.strip_prefix(b"{")?;
    if rest.first() == Some(&b'}') {
        return Some((out, 2));
    }
    loop {
        let key = string(rest)?;
        let value = rest[key.len() + 2..].strip_prefix(b":")?;
        rest = skip(value, 0)?;
        if let Some(i) = keys.iter().position(|k| *k == key) {
            out[i] = whole(&value[..value.len() - rest.len()]);
        }
        match rest.split_first()? {
            (b',', r) => rest = r,
            (b'}', r) => return Some((out, bytes.len() - r.len())),
            _ => return None,
        }
    }
}

/// The text of the JSON string `bytes` opens with, escapes and all (its quotes excluded).
fn string(bytes: &[u8]) -> Option<&[u8]> {
    let body = bytes.strip_prefix(b"\"")?;
    let mut at = 0;
    loop {
        at += memchr::memchr2(b'"', b'\\', body.get(at..)?)?;
        match body[at] {
            b'"' => return Some(&body[..at]),
            _ => at += 2,
        }
    }
}

/// What follows the compact JSON value `bytes` opens with (objects and arrays nested a few deep).
fn skip(bytes: &[u8], depth: u8) -> Option<&[u8]> {
    match *bytes.first()? {
        b'"' => Some(&bytes[string(bytes)?.len() + 2..]),
        open @ (b'{' | b'[') if depth < 4 => {
            let close = if open == b'{' { b'}' } else { b']' };
            let mut rest = &bytes[1..];
            if rest.first() == Some(&close) {
                return Some(&rest[1..]);
            }
            loop {
                if open == b'{' {
                    rest = rest[string(rest)?.len() + 2..].strip_prefix(b":")?;
                }
                rest = skip(rest, depth + 1)?;
                match rest.split_first()? {
                    (b',', r) => rest = r,
                    (c, r) if *c == close => return Some(r),
                    _ => return None,
                }
            }
        }
        b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
            let end = bytes.iter().position(|c| matches!(c, b',' | b'}' | b']'))?;
            Some(&bytes[end..])
        }
        _ => None,
    }
}

/// A whole number written as JSON, if it is one that fits.
fn whole(text: &[u8]) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0u64, |n, c| {
        let digit = c.checked_sub(b'0').filter(|d| *d <= 9)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// The raw text of the string after the first `key` in `bytes`, if it holds no escape (ids,
/// model names): read without parsing or copying.
pub(super) fn plain_str_after<'a>(bytes: &'a [u8], key: &Key) -> Option<&'a [u8]> {
    let at = key.find(bytes)? + key.quoted.len();
    plain_str(bytes[at..].strip_prefix(b"\"")?)
}

/// The text of a string up to its closing quote (`rest` is what follows its opening one), if
/// it holds no escape.
pub(super) fn plain_str(rest: &[u8]) -> Option<&[u8]> {
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    (rest[end] == b'"').then_some(&rest[..end])
}

/// Whether `needle` is in the first `within` bytes of `line`.
pub(super) fn early(line: &[u8], needle: &Key, within: usize) -> bool {
    needle.find(&line[..line.len().min(within)]).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_read_after_its_key_and_never_from_inside_a_string() {
        let tail = br#"swer \"usage\":{\"x\":1} end","session_id":"s1","usage":{"input_tokens":3},"more":[1"#;
        assert_eq!(value_after(tail, "usage"), Some(serde_json::json!({"input_tokens": 3})));
        assert_eq!(value_after(tail, "session_id"), Some(Value::from("s1")));
        assert_eq!(value_after(tail, "more"), None);
        assert_eq!(value_after(tail, "cost"), None);
        assert_eq!(value_after(br#""usage": {"a":"#, "usage"), None);
        let usage = br#"{"input_tokens":3,"cache_creation":{"a":1,"b":[2,{"c":"}"}]},"output_tokens":4.5,"x":"q\"}","cache_read_input_tokens":-1,"service_tier":null,"y":7} tail"#;
        let keys: [&[u8]; 4] = [b"input_tokens", b"output_tokens", b"y", b"absent"];
        assert_eq!(numbers(usage, keys), Some(([Some(3), None, Some(7), None], usage.len() - 5)));
        assert_eq!(numbers(b"{}", keys), Some(([None; 4], 2)));
        for bad in [
            &br#"{"a":1"#[..],
            br#"{"a":"\"#,
            br#"{"a" :1}"#,
            br#"{"a":1,}"#,
            b"[1]",
            br#"{"a":x}"#,
            br#"{"a":[[[[[1]]]]]}"#,
        ] {
            assert_eq!(numbers(bad, keys), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!((whole(b"18446744073709551615"), whole(b"18446744073709551616")), (Some(u64::MAX), None));
        static STREAM: Key = Key::new("stream");
        assert!(
            early(b"{\"type\":\"stream_event\"", &STREAM, 15) && !early(b"{\"type\":\"stream_event\"", &STREAM, 14)
        );
    }
}
