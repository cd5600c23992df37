//! What the server publishes about its tools, settled once at start-up: descriptions and
//! input schemas that state the limits this server was started with, and schemas every
//! validator reads without warnings.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::JsonObject;
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
/// description and its parameters' descriptions, and only standard formats in its input and
/// output schemas.
pub fn publish<S>(router: &mut ToolRouter<S>, max: MaxWait) {
    for route in router.map.values_mut() {
        let tool = &mut route.attr;
        if let Some(d) = &tool.description {
            tool.description = Some(max.fill(d).into());
        }
        tool.input_schema = settle(&tool.input_schema, max);
        tool.output_schema = tool.output_schema.as_ref().map(|s| settle(s, max));
    }
}

fn settle(schema: &JsonObject, max: MaxWait) -> Arc<JsonObject> {
    let mut schema = Value::Object(schema.clone());
    fill_descriptions(&mut schema, max);
    strip_formats(&mut schema);
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("a schema object stays an object"),
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
