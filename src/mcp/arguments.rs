//! Arguments a tool cannot read (a required one missing, one of the wrong type) are refused
//! with a message that names the argument, says what it must be and which call to make,
//! where rmcp would answer in serde's words ("failed to deserialize parameters: missing
//! field `question`").

use std::sync::Arc;

use futures_util::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{DynCallToolHandler, ToolCallContext};
use rmcp::model::{CallToolResponse, ErrorCode};
use serde_json::Value;

use super::{result, shape};
use crate::error::Error;

/// How rmcp's message for arguments that do not deserialize begins.
const UNREAD: &str = "failed to deserialize parameters:";

/// Make every tool of `router` explain arguments it cannot read, by its published input
/// schema (so call after `publish`).
pub fn explain<S: Send + Sync + 'static>(router: &mut ToolRouter<S>) {
    for route in router.map.values_mut() {
        let tool: Arc<str> = route.attr.name.as_ref().into();
        let schema = Arc::new(Value::Object((*route.attr.input_schema).clone()));
        route.call = explaining(route.call.clone(), tool, schema);
    }
}

fn explaining<S: Send + Sync + 'static>(
    call: Arc<DynCallToolHandler<S>>,
    tool: Arc<str>,
    schema: Arc<Value>,
) -> Arc<DynCallToolHandler<S>> {
    Arc::new(move |ctx: ToolCallContext<'_, S>| -> BoxFuture<'_, Result<CallToolResponse, ErrorData>> {
        // Kept for the explanation: the call takes them.
        let args = Value::Object(ctx.arguments.clone().unwrap_or_default());
        let answer = call(ctx);
        let (tool, schema) = (tool.clone(), schema.clone());
        Box::pin(async move {
            match answer.await {
                Err(e) if e.code == ErrorCode::INVALID_PARAMS && e.message.starts_with(UNREAD) => {
                    let why = e.message[UNREAD.len()..].trim();
                    Ok(result::error(&unread(&tool, &schema, &args, why)).into())
                }
                r => r,
            }
        })
    })
}

/// The refusal of `args`, which `tool` could not read (serde said `why`).
fn unread(tool: &str, schema: &Value, args: &Value, why: &str) -> Error {
    Error::Usage(match shape::misfit(schema, args) {
        Some(m) => format!("{}; call `{tool}` again with {}", m.describe(), m.fix()),
        None => format!(
            "the arguments do not fit `{tool}` ({why}); call `{tool}` again with the arguments its input schema names"
        ),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::error::Frontend;

    #[test]
    fn a_refusal_names_the_argument_what_it_must_be_and_the_call() {
        let schema = json!({
            "properties": {"token": {"type": "string", "description": "The task's token."}, "grace_secs": {"type": "number"}},
            "required": ["token"],
        });
        for (args, says) in [
            (
                json!({}),
                "`token` (the task's token) is missing: it must be a string; call `halt` again with `token` as a string",
            ),
            (
                json!({"token": "a3f2c1", "grace_secs": "2.5"}),
                "`grace_secs` is a string where it must be a number; call `halt` again with `grace_secs`: 2.5",
            ),
            (
                json!({"token": "a3f2c1"}),
                "the arguments do not fit `halt` (serde's reason); call `halt` again with the arguments its input \
                 schema names",
            ),
        ] {
            assert_eq!(unread("halt", &schema, &args, "serde's reason").message(Frontend::Mcp), says);
        }
    }
}
