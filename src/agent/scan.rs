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

/// A key to look for in events: `"key":`, its searcher built once.
pub(super) struct Key {
    quoted: &'static str,
    finder: std::sync::OnceLock<memchr::memmem::Finder<'static>>,
}

impl Key {
    /// `quoted` is the key as it is written, `"key":`.
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
}

/// The value after the first `key` in `bytes`, as a type of its own (borrowing what it can
/// from `bytes`): no map of every field is built; none if the value is not of that type.
pub(super) fn parse_after<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8], key: &Key) -> Option<T> {
    let at = key.find(bytes)? + key.quoted.len();
    serde_json::Deserializer::from_slice(&bytes[at..]).into_iter::<T>().next()?.ok()
}

/// The raw text of the string after the first `key` in `bytes`, if it holds no escape (ids,
/// model names): read without parsing or copying.
pub(super) fn plain_str_after<'a>(bytes: &'a [u8], key: &Key) -> Option<&'a [u8]> {
    let at = key.find(bytes)? + key.quoted.len();
    let rest = bytes[at..].strip_prefix(b"\"")?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    (rest[end] == b'"').then_some(&rest[..end])
}

/// Whether `needle` is in the first `within` bytes of `line`.
pub(super) fn early(line: &[u8], needle: &[u8], within: usize) -> bool {
    memchr::memmem::find(&line[..line.len().min(within)], needle).is_some()
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
        assert!(
            early(b"{\"type\":\"stream_event\"", b"stream", 15) && !early(b"{\"type\":\"stream_event\"", b"stream", 14)
        );
    }
}
