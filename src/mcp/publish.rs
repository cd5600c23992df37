//! What the server publishes about its tools, settled once at start-up: descriptions and
//! input schemas that state the limits this server was started with, and schemas every
//! validator reads without warnings.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{JsonObject, ToolAnnotations};
use serde_json::Value;

use super::limits::MaxWait;

/// JSON Schema's own formats (draft 2020-12). schemars adds its own (`uint64`, `int32`,
/// `double`…), which validators such as Ajv, in every Node-based client, warn about.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Settle every tool's published form: `{max_wait}` and `{hybrid_wait}` filled in in its
/// description and its parameters' descriptions, only standard formats, and nothing a client
/// would assume anyway.
pub fn publish<S>(router: &mut ToolRouter<S>, max: MaxWait) {
    for route in router.map.values_mut() {
        let tool = &mut route.attr;
        if let Some(d) = &tool.description {
            tool.description = Some(max.fill(d).into());
        }
        tool.input_schema = settle(&tool.input_schema, max);
        // Only that a structured result comes, and that it is an object: what each holds is in
        // the tool's description and the result itself, and every client reads the list.
        tool.output_schema = tool.output_schema.as_ref().map(|_| Arc::new(object_schema()));
        tool.annotations = tool.annotations.take().and_then(only_news);
    }
}

/// Name the roles of the agents file in `ask`'s description, as they are when the server
/// starts (a role asked for later is checked against the file as it is then).
pub fn name_roles<S>(router: &mut ToolRouter<S>, roles: &crate::ops::Roles) {
    let Some(tool) = router.map.get_mut("ask").map(|r| &mut r.attr) else { return };
    let names: Vec<&str> = roles.roles.iter().map(|r| r.role.as_str()).collect();
    let builtin: Vec<&str> = roles.builtin.iter().map(|r| r.role.as_str()).collect();
    let listed = match (names.is_empty(), builtin.is_empty()) {
        // Nothing to choose from: `role`'s own description says the rest.
        (true, true) => return,
        (false, true) => crate::agents::name_list(&names),
        (true, false) => format!("built-in {} (each runs that agent CLI)", builtin.join(", ")),
        (false, false) => format!(
            "{}, and built-in {} (each runs that agent CLI)",
            crate::agents::name_list(&names),
            builtin.join(", ")
        ),
    };
    // Every client reads the whole list: the program alone says what the others run.
    let program = roles.other_roles.command.first().map_or("", String::as_str);
    let said = format!(" Roles: {listed}; others run `{program}`.");
    let description = tool.description.as_deref().unwrap_or_default();
    tool.description = Some(format!("{description}{said}").into());
}

/// `{"type": "object"}`.
fn object_schema() -> JsonObject {
    let mut o = JsonObject::new();
    o.insert("type".into(), Value::String("object".into()));
    o
}

/// The hints that differ from what a client assumes without them (not read-only, destructive,
/// not idempotent, open world), and none that do not apply (a read-only tool is neither
/// destructive nor not); no title, the tool's name says it.
fn only_news(mut a: ToolAnnotations) -> Option<ToolAnnotations> {
    a.title = None;
    let read_only = a.read_only_hint == Some(true);
    a.read_only_hint = a.read_only_hint.filter(|&h| h);
    a.destructive_hint = a.destructive_hint.filter(|&h| !h && !read_only);
    a.idempotent_hint = a.idempotent_hint.filter(|&h| h && !read_only);
    a.open_world_hint = a.open_world_hint.filter(|&h| !h);
    let any = [a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint].iter().any(Option::is_some);
    any.then_some(a)
}

fn settle(schema: &JsonObject, max: MaxWait) -> Arc<JsonObject> {
    let mut schema = Value::Object(schema.clone());
    fill_descriptions(&mut schema, max);
    strip_formats(&mut schema);
    compact(&mut schema);
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("a schema object stays an object"),
    }
}

/// Make an input schema short, for every client reads it (and a model pays for each byte):
/// no `$schema`, an optional parameter typed as itself rather than "it or null", no default
/// that is nothing (`null`, `false`, `[]`: what leaving the parameter out means anyway).
fn compact(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    map.remove("$schema");
    let required: Vec<Value> = map.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(Value::Object(props)) = map.get_mut("properties") else { return };
    for (name, prop) in props.iter_mut() {
        let Value::Object(p) = prop else { continue };
        if required.iter().any(|r| r == name.as_str()) {
            continue;
        }
        let nothing =
            |v: &Value| matches!(v, Value::Null | Value::Bool(false)) || v.as_array().is_some_and(Vec::is_empty);
        if p.get("default").is_some_and(nothing) {
            p.remove("default");
        }
        if let Some(Value::Array(types)) = p.get("type")
            && let [one] = types.iter().filter(|t| *t != "null").collect::<Vec<_>>().as_slice()
        {
            let one = (*one).clone();
            p.insert("type".into(), one);
        }
    }
}

fn fill_descriptions(schema: &mut Value, max: MaxWait) {
    match schema {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match v {
                    Value::String(text) if k == "description" => *text = max.fill(text),
                    _ => fill_descriptions(v, max),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill_descriptions(v, max)),
        _ => {}
    }
}

/// Remove every non-standard `format` keyword from `schema`, at any depth. Values (`enum`,
/// `const`, `default`, `examples`) are data, not schemas, and are left alone; so is a property
/// that happens to be named `format`.
fn strip_formats(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.retain(|k, v| k != "format" || v.as_str().is_none_or(|f| STANDARD_FORMATS.contains(&f)));
            for (k, v) in map.iter_mut() {
                if k == "properties" {
                    // Property names, any of them `format`, each holding a schema.
                    if let Value::Object(props) = v {
                        props.values_mut().for_each(strip_formats);
                    }
                } else if !matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                    strip_formats(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_formats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_standard_formats_are_left() {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "count": {"type": "integer", "format": "uint64", "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "format": {"type": "string", "format": "int32"},
                "nested": {"anyOf": [{"type": "number", "format": "double"}, {"type": "null"}]},
                "list": {"type": "array", "items": {"type": "integer", "format": "uint"}},
                "fixed": {"const": {"format": "uint64"}, "default": {"format": "x"}},
            },
            "$defs": {"Inner": {"type": "integer", "format": "int64"}},
        });
        strip_formats(&mut schema);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0},
                    "when": {"type": "string", "format": "date-time"},
                    "format": {"type": "string"},
                    "nested": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                    "list": {"type": "array", "items": {"type": "integer"}},
                    "fixed": {"const": {"format": "uint64"}, "default": {"format": "x"}},
                },
                "$defs": {"Inner": {"type": "integer"}},
            })
        );
    }
}
