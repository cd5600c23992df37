//! What the server publishes about its tools, settled once at start-up: descriptions and
//! input schemas that state the limits this server was started with.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use serde_json::Value;

use super::limits::MaxWait;

/// Fill `{max_wait}` and `{hybrid_wait}` in every tool's description and in the descriptions
/// of its parameters.
pub fn fill_in<S>(router: &mut ToolRouter<S>, max: MaxWait) {
    for route in router.map.values_mut() {
        let tool = &mut route.attr;
        if let Some(d) = &tool.description {
            tool.description = Some(max.fill(d).into());
        }
        let mut input = Value::Object((*tool.input_schema).clone());
        fill_descriptions(&mut input, max);
        if let Value::Object(schema) = input {
            tool.input_schema = Arc::new(schema);
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
