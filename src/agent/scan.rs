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
