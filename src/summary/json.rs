//! The answer of an agent that prints its result as JSON (`claude -p --output-format json`,
//! `gemini -p --output-format json`): a string field of the last JSON object in its output.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// How many object openings, from the end, are tried before giving up: other output may hold
/// lines that start with `{` too, but the result comes last.
const MAX_CANDIDATES: usize = 64;

/// The string at `field` (a dotted path, like `result` or `response.text`) of the last JSON
/// object in `body` that begins at a line's start and has it. Escape sequences and other
/// output around the object do not matter; `None` when no such object is there. Each try
/// skips what it does not need unparsed, and all of them together read at most about twice
/// `body`, however hostile the output (openings of objects that never close).
pub fn last_field(body: &[u8], field: &str) -> Option<String> {
    search(body, field).0
}

/// `last_field`, and how many bytes it gave the parser.
fn search(body: &[u8], field: &str) -> (Option<String>, usize) {
    let path: Vec<&str> = field.split('.').collect();
    let starts = (0..body.len()).rev().filter(|&i| body[i] == b'{' && (i == 0 || body[i - 1] == b'\n'));
    let (mut budget, mut offered) = (2 * body.len() + 1, 0);
    for at in starts.take(MAX_CANDIDATES) {
        let cost = body.len() - at;
        if cost > budget {
            break;
        }
        budget -= cost;
        offered += cost;
        let mut de = serde_json::Deserializer::from_slice(&body[at..]);
        if let Ok(Some(s)) = At(&path).deserialize(&mut de) {
            return (Some(s), offered);
        }
    }
    (None, offered)
}

/// Reads the string at a path of the JSON value it is given; `None` if there is none there.
struct At<'p>(&'p [&'p str]);

impl<'de> DeserializeSeed<'de> for At<'_> {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for At<'_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Option<String>, E> {
        Ok(self.0.is_empty().then(|| s.to_owned()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            match self.0.split_first() {
                Some((want, rest)) if *want == key && found.is_none() => found = map.next_value_seed(At(rest))?,
                _ => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(found)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<String>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
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
            ("{\"result\":\"first\",\"result\":\"second\"}", "result", Some("first")),
            ("{\"big\":[1,[2,{\"x\":null}]],\"result\":\"after\"}", "result", Some("after")),
            ("text {\"result\":\"mid-line\"}\n", "result", None),
        ];
        for (body, field, want) in cases {
            assert_eq!(last_field(body.as_bytes(), field).as_deref(), *want, "{body:?}");
        }
    }

    #[test]
    fn objects_that_never_close_cost_a_bounded_read() {
        // 64 openings, then megabytes of an array that never ends: each try would read it all.
        let mut body = "{\"a\":[\n".repeat(64).into_bytes();
        body.extend("1,\n".repeat(1 << 20).as_bytes());
        let (found, offered) = search(&body, "result");
        assert_eq!(found, None);
        assert!(offered <= 2 * body.len() + 1, "{offered} bytes parsed of {}", body.len());
        // A result after them is still found, at once.
        body.extend_from_slice(b"\n{\"result\":\"late\"}\n");
        assert_eq!(search(&body, "result"), (Some("late".into()), 18));
    }
}
