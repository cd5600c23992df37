//! What is wrong with a request's JSON against the small JSON schemas the server publishes (a
//! tool's input schema) or reads (a protocol method's params): the first property that is
//! missing or of the wrong type, in words a model or a client's author can act on.

use serde_json::Value;

/// One property that does not fit its schema.
#[derive(Debug, PartialEq)]
pub struct Misfit {
    /// The property's name.
    pub name: String,
    /// Its description in the schema, as a phrase ("the task for the agent").
    pub about: Option<String>,
    /// What it must be: "a string", "a whole number of at least 0", "a list of strings"…
    pub want: String,
    /// What was given instead: `None` if it is missing.
    pub given: Option<Given>,
}

/// A value given where another kind was wanted.
#[derive(Debug, PartialEq)]
pub struct Given {
    /// What it is: "a string", "null", "a list holding a number"…
    pub kind: String,
    /// The value as it should have been written, when that is plain (`"5"` for a number: `5`).
    pub fixed: Option<String>,
}

impl Misfit {
    /// "`name` (what it is for, as the schema says) is missing: it must be a string", or
    /// "`name` is a string where it must be a number".
    pub fn describe(&self) -> String {
        match &self.given {
            None => {
                let about = self.about.as_ref().map(|a| format!(" ({a})")).unwrap_or_default();
                format!("`{}`{about} is missing: it must be {}", self.name, self.want)
            }
            Some(g) => format!("`{}` is {} where it must be {}", self.name, g.kind, self.want),
        }
    }

    /// How to give it in the next call: "`grace_secs`: 5", or "`question` as a string".
    pub fn fix(&self) -> String {
        match self.given.as_ref().and_then(|g| g.fixed.as_ref()) {
            Some(fixed) => format!("`{}`: {fixed}", self.name),
            None => format!("`{}` as {}", self.name, self.want),
        }
    }
}

/// The first property of `value` that does not fit the object `schema`: a required one that is
/// missing (in the order `required` lists them), else one of the wrong type (in name order).
/// A null optional property fits (it stands for "not given"); so does any property whose
/// schema names no type this reads.
pub fn misfit(schema: &Value, value: &Value) -> Option<Misfit> {
    let props = schema.get("properties").and_then(Value::as_object);
    let prop = |name: &str| props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let given = value.as_object();
    let field = |name: &str| given.and_then(|g| g.get(name));
    if let Some(name) = required.iter().find(|n| field(n).is_none()) {
        let p = prop(name);
        return Some(Misfit { name: (*name).to_owned(), about: about(p), want: want(p)?, given: None });
    }
    for (name, p) in props.into_iter().flatten() {
        let Some(v) = field(name) else { continue };
        if v.is_null() && !required.contains(&name.as_str()) {
            continue;
        }
        if !fits(p, v) {
            let fixed = fixed(p, v);
            let given = Some(Given { kind: kind(v), fixed });
            return Some(Misfit { name: name.clone(), about: about(p), want: want(p)?, given });
        }
    }
    None
}

/// The one type a property's schema names, if it names one.
fn type_of(p: &Value) -> Option<&str> {
    match p.get("type")? {
        Value::String(t) => Some(t),
        Value::Array(ts) => match ts.iter().filter(|t| *t != "null").collect::<Vec<_>>()[..] {
            [one] => one.as_str(),
            _ => None,
        },
        _ => None,
    }
}

fn fits(p: &Value, v: &Value) -> bool {
    let whole = |v: &Value| v.is_i64() || v.is_u64();
    let at_least = |v: &Value| match (p.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        (Some(min), Some(n)) => n >= min,
        _ => true,
    };
    match type_of(p) {
        Some("string") => v.is_string(),
        Some("boolean") => v.is_boolean(),
        Some("object") => v.is_object(),
        Some("number") => v.is_number() && at_least(v),
        Some("integer") => whole(v) && at_least(v),
        Some("array") => v.as_array().is_some_and(|items| {
            let item = p.get("items").unwrap_or(&Value::Null);
            items.iter().all(|i| fits(item, i))
        }),
        _ => true,
    }
}

/// What a property must be, in words; `None` for a schema this does not read.
fn want(p: &Value) -> Option<String> {
    let min = p.get("minimum").and_then(Value::as_f64).map(|m| format!(" of at least {m}")).unwrap_or_default();
    Some(match type_of(p)? {
        "string" => "a string".to_owned(),
        "boolean" => "true or false".to_owned(),
        "object" => "an object".to_owned(),
        "number" => format!("a number{min}"),
        "integer" => format!("a whole number{min}"),
        "array" => match p.get("items").and_then(want) {
            Some(item) => format!("a list, each item {item}"),
            None => "a list".to_owned(),
        },
        _ => return None,
    })
}

/// What kind of value `v` is, in words.
fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".to_owned(),
        Value::Array(items) if items.is_empty() => "an empty list".to_owned(),
        Value::Array(items) => match items.iter().find(|i| !i.is_string()) {
            Some(odd) => format!("a list holding {}", kind(odd)),
            None => "a list of strings".to_owned(),
        },
        Value::Object(_) => "an object".to_owned(),
    }
}

/// `v` as it should have been written for `p`, when that is plain: a number or a boolean sent
/// as text, a single string where a list of them is wanted.
fn fixed(p: &Value, v: &Value) -> Option<String> {
    let fixed = match (type_of(p)?, v) {
        ("number" | "integer", Value::String(s)) => Value::from(s.trim().parse::<f64>().ok()?),
        ("boolean", Value::String(s)) => Value::Bool(s.trim().parse().ok()?),
        // A string with spaces is a command line, whose words (quoting aside) are the list.
        ("array", Value::String(s)) if s.contains(['\'', '"', '\\']) => return None,
        ("array", Value::String(s)) => Value::Array(s.split_whitespace().map(Value::from).collect()),
        ("string", Value::Number(_)) => Value::String(v.to_string()),
        _ => return None,
    };
    // A number that is whole is written as one: 5, not 5.0.
    let fixed = match fixed.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => Value::from(f as i64),
        _ => fixed,
    };
    fits(p, &fixed).then(|| fixed.to_string())
}

/// A property's description as a phrase: "Seconds from SIGTERM to SIGKILL (default 5)." →
/// "seconds from SIGTERM to SIGKILL (default 5)".
fn about(p: &Value) -> Option<String> {
    let d = p.get("description")?.as_str()?.trim().trim_end_matches(['.', ':']);
    let mut chars = d.chars();
    let first = chars.next()?;
    // An acronym or a name keeps its capital: "SIGTERM", "JSON".
    let lower = chars.clone().next().is_none_or(|c| !c.is_uppercase());
    Some(if lower { first.to_lowercase().chain(chars).collect() } else { d.to_owned() })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The task for the agent."},
                "grace_secs": {"type": "number", "description": "Seconds from SIGTERM to SIGKILL (default 5)."},
                "offset": {"type": "integer", "minimum": 0},
                "tokens": {"type": "array", "items": {"type": "string"}},
                "raw": {"type": "boolean", "default": false},
                "role": {"type": "string"},
            },
            "required": ["role", "question"],
        })
    }

    fn said(args: Value) -> Option<(String, String)> {
        misfit(&schema(), &args).map(|m| (m.describe(), m.fix()))
    }

    #[test]
    fn the_first_missing_or_misfit_property_is_named_with_what_it_must_be() {
        let cases = [
            (json!({"question": "q"}), "`role` is missing: it must be a string", "`role` as a string"),
            (
                json!({"role": "r"}),
                "`question` (the task for the agent) is missing: it must be a string",
                "`question` as a string",
            ),
            (
                json!({"role": "r", "question": "q", "grace_secs": "5"}),
                "`grace_secs` is a string where it must be a number",
                "`grace_secs`: 5",
            ),
            (
                json!({"role": "r", "question": "q", "offset": -1}),
                "`offset` is the number -1 where it must be a whole number of at least 0",
                "`offset` as a whole number of at least 0",
            ),
            (
                json!({"role": "r", "question": "q", "offset": 4.5}),
                "`offset` is the number 4.5 where it must be a whole number of at least 0",
                "`offset` as a whole number of at least 0",
            ),
            (
                json!({"role": "r", "question": "q", "tokens": "a3f2c1"}),
                "`tokens` is a string where it must be a list, each item a string",
                "`tokens`: [\"a3f2c1\"]",
            ),
            (
                json!({"role": "r", "question": "q", "tokens": "ls -la"}),
                "`tokens` is a string where it must be a list, each item a string",
                "`tokens`: [\"ls\",\"-la\"]",
            ),
            (
                json!({"role": "r", "question": "q", "tokens": "echo 'a b'"}),
                "`tokens` is a string where it must be a list, each item a string",
                "`tokens` as a list, each item a string",
            ),
            (
                json!({"role": "r", "question": "q", "tokens": ["a3f2c1", 7]}),
                "`tokens` is a list holding the number 7 where it must be a list, each item a string",
                "`tokens` as a list, each item a string",
            ),
            (
                json!({"role": "r", "question": "q", "raw": "yes"}),
                "`raw` is a string where it must be true or false",
                "`raw` as true or false",
            ),
            (json!({"role": null, "question": "q"}), "`role` is null where it must be a string", "`role` as a string"),
            (json!({"role": 5, "question": "q"}), "`role` is the number 5 where it must be a string", "`role`: \"5\""),
        ];
        for (args, describe, fix) in cases {
            assert_eq!(said(args.clone()), Some((describe.to_owned(), fix.to_owned())), "{args}");
        }
    }

    #[test]
    fn what_fits_or_is_left_out_is_not_blamed() {
        // Null for an optional property is "not given"; unknown properties are not this
        // checker's business; a schema without a type fits anything.
        assert_eq!(said(json!({"role": "r", "question": "q", "grace_secs": null, "extra": [1]})), None);
        assert_eq!(said(json!({"role": "r", "question": "q", "offset": 0, "tokens": []})), None);
        assert_eq!(misfit(&json!({"properties": {"x": {"anyOf": []}}}), &json!({"x": 1})), None);
    }
}
