//! The answer of an agent that prints its result as JSON (`claude -p --output-format json`,
//! `gemini -p --output-format json`): a string field of the last JSON object in its output.

use serde_json::Value;

/// How many object openings, from the end, are tried before giving up: other output may hold
/// lines that start with `{` too, but the result comes last.
const MAX_CANDIDATES: usize = 64;

/// The string at `field` (a dotted path, like `result` or `response.text`) of the last JSON
/// object in `body` that begins at a line's start and has it. Escape sequences and other
/// output around the object do not matter; `None` when no such object is there.
pub fn last_field(body: &[u8], field: &str) -> Option<String> {
    let starts = (0..body.len()).rev().filter(|&i| body[i] == b'{' && (i == 0 || body[i - 1] == b'\n'));
    for at in starts.take(MAX_CANDIDATES) {
        let mut values = serde_json::Deserializer::from_slice(&body[at..]).into_iter::<Value>();
        let Some(Ok(value)) = values.next() else { continue };
        let found = field.split('.').try_fold(&value, |v, key| v.get(key));
        if let Some(Value::String(s)) = found {
            return Some(s.clone());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_field_of_the_last_object() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("{\"result\":\"ok\"}\n", "result", Some("ok")),
            ("noise\n{\"result\":\"first\"}\nmore noise\n{\"result\":\"last\"}\n", "result", Some("last")),
            ("{\n  \"response\": \"pretty\\nprinted\",\n  \"stats\": {}\n}\n", "response", Some("pretty\nprinted")),
            ("{\"a\":{\"b\":\"deep\"}}", "a.b", Some("deep")),
            ("{\"result\":3}\n", "result", None),
            ("{\"other\":\"x\"}\n", "result", None),
            ("{\"result\":\"cut sh", "result", None),
            ("no json at all\n", "result", None),
            ("text {\"result\":\"mid-line\"}\n", "result", None),
        ];
        for (body, field, want) in cases {
            assert_eq!(last_field(body.as_bytes(), field).as_deref(), *want, "{body:?}");
        }
    }
}
