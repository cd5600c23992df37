//! Who may call the HTTP server, and what: the bearer token of each request (`ops::authenticate`),
//! the answers for a request let in by none (401, with where to learn how to get one: RFC 9728's
//! protected resource metadata), the Host and Origin a request may come with (a web page cannot
//! reach a server on the user's loopback by DNS rebinding), and the calls a read-only token may
//! not make (403).

use axum::http::header::{AUTHORIZATION, HOST, ORIGIN, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};

use crate::ops::Denied;

/// The tools a read-only token may call: they read, or wait.
const READ_TOOLS: [&str; 5] = ["await", "list", "logs", "wait_for_event", "usage"];

/// The path of the MCP endpoint, and of its protected resource metadata.
pub const ENDPOINT: &str = "/mcp";
pub const METADATA: &str = "/.well-known/oauth-protected-resource";

/// The bearer token of a request, if it has one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// The answer to a request no valid token lets in: 401, saying where the metadata is.
pub fn unauthorized(base: &str, denied: &Denied) -> Response {
    let reason = denied.reason();
    let mut challenge = format!("Bearer resource_metadata=\"{base}{METADATA}{ENDPOINT}\"");
    if *denied != Denied::Missing {
        challenge.push_str(&format!(", error=\"invalid_token\", error_description=\"{}\"", quoted(&reason)));
    }
    let mut r = (StatusCode::UNAUTHORIZED, axum::Json(json!({ "error": reason }))).into_response();
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        r.headers_mut().insert(WWW_AUTHENTICATE, v);
    }
    r
}

/// The protected resource metadata (RFC 9728) of the server at `base`: agentctl issues its own
/// tokens (`agentctl token create`), so it names no authorization server; a proxy in front that
/// speaks OAuth serves its own.
pub fn metadata(base: &str) -> Response {
    let doc = json!({
        "resource": format!("{base}{ENDPOINT}"),
        "bearer_methods_supported": ["header"],
        "resource_name": "agentctl",
    });
    axum::Json(doc).into_response()
}

/// What a JSON-RPC request body asks for, as far as access goes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Call {
    /// The method (`tools/call`, `initialize`…), if the body is a request or notification.
    pub method: Option<String>,
    /// The tool a `tools/call` names.
    pub tool: Option<String>,
    /// The request's id, for an error answer.
    pub id: Option<Value>,
}

impl Call {
    /// Read `body`, a JSON-RPC message; what is not JSON, or not one message, is refused
    /// (a JSON-RPC error, with HTTP 400) as the stdio server answers such a line.
    pub fn read(body: &[u8]) -> std::result::Result<Call, Malformed> {
        let refuse = |id: Option<Value>, code: i64, message: String| Malformed { id, code, message };
        let v = match serde_json::from_slice::<Value>(body) {
            Err(e) => return Err(refuse(None, -32700, format!("parse error: the body is not JSON ({e})"))),
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return Err(refuse(None, -32600, "invalid request: send one JSON-RPC message, an object".into())),
        };
        let call = Call::of(body);
        if v.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(refuse(call.id, -32600, "invalid request: `jsonrpc` must be \"2.0\"".into()));
        }
        if let Err(e) = serde_json::from_value::<ClientJsonRpcMessage>(v) {
            // A request whose id and method can be read has its params wrong.
            let id = call.id.clone().filter(|id| id.is_string() || id.is_number());
            return Err(match (&id, &call.method) {
                (Some(_), Some(m)) => refuse(id, -32602, format!("invalid params for `{m}`: {e}")),
                _ => refuse(id, -32600, format!("invalid request: not a JSON-RPC 2.0 message ({e})")),
            });
        }
        Ok(call)
    }

    /// What `body` asks for (nothing, if it is not a JSON-RPC message).
    pub fn of(body: &[u8]) -> Call {
        let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(body) else {
            return Call::default();
        };
        let method = m.get("method").and_then(Value::as_str).map(str::to_owned);
        let tool = match method.as_deref() {
            Some("tools/call") => {
                m.get("params").and_then(|p| p.get("name")).and_then(Value::as_str).map(str::to_owned)
            }
            _ => None,
        };
        Call { method, tool, id: m.get("id").cloned() }
    }

    /// Whether it starts, stops, answers or messages a task (what a read-only token may not).
    pub fn changes_tasks(&self) -> bool {
        match (self.method.as_deref(), self.tool.as_deref()) {
            (Some("tools/call"), tool) => !tool.is_some_and(|t| READ_TOOLS.contains(&t)),
            (Some(m), _) => matches!(m, "tasks/cancel" | "tasks/update"),
            (None, _) => false,
        }
    }

    /// What the request log names: the method, and the tool of a call.
    pub fn label(&self) -> String {
        match (&self.method, &self.tool) {
            (Some(m), Some(t)) => format!("{m} {t}"),
            (Some(m), None) => m.clone(),
            (None, _) => "-".into(),
        }
    }
}

/// A request body that is not a JSON-RPC message: the error it is answered with.
#[derive(Debug)]
pub struct Malformed {
    id: Option<Value>,
    code: i64,
    message: String,
}

impl IntoResponse for Malformed {
    fn into_response(self) -> Response {
        rpc_error(StatusCode::BAD_REQUEST, self.id, self.code, self.message)
    }
}

/// A JSON-RPC error answer (to the request `id`, if it could be read), with HTTP `status`.
pub fn rpc_error(status: StatusCode, id: Option<Value>, code: i64, message: String) -> Response {
    let body = json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } });
    (status, axum::Json(body)).into_response()
}

/// The answer to a call a read-only token may not make: 403, and a JSON-RPC error saying why.
pub fn forbidden(call: &Call, token: &str) -> Response {
    let what = call.tool.as_deref().or(call.method.as_deref()).unwrap_or("this call");
    let message = format!(
        "token `{token}` is read-only: it may call {} but not `{what}`; use a token made without --read-only",
        READ_TOOLS.join(", ")
    );
    rpc_error(StatusCode::FORBIDDEN, call.id.clone(), -32001, message)
}

/// Whether the request's Host (and Origin, if it has one) name one of `allowed` (host names,
/// or `host:port`). A page a browser loaded from elsewhere cannot then reach the server through
/// a name it made resolve to the server's address.
pub fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let Some(host) = headers.get(HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let origin_host = match headers.get(ORIGIN).map(|o| o.to_str()) {
        None => None,
        Some(Ok(o)) if o != "null" => match o.split_once("://") {
            Some((_, rest)) => Some(rest.trim_end_matches('/')),
            None => return false,
        },
        Some(_) => return false,
    };
    [Some(host), origin_host].into_iter().flatten().all(|authority| authority_allowed(authority, allowed))
}

fn authority_allowed(authority: &str, allowed: &[String]) -> bool {
    let name = match authority.rsplit_once(':') {
        // `[::1]:8080`, `host:8080`; a bare IPv6 address has more than one colon.
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) && !h.ends_with(':') => h,
        _ => authority,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    allowed.iter().any(|a| {
        a.eq_ignore_ascii_case(authority) || a.trim_start_matches('[').trim_end_matches(']').eq_ignore_ascii_case(name)
    })
}

/// `s` as it may stand in a quoted string of a header.
fn quoted(s: &str) -> String {
    s.chars().filter(|c| *c != '"' && *c != '\\' && !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_bearer_token_is_read_from_its_header_alone() {
        assert_eq!(bearer(&headers(&[("authorization", "Bearer abc")])), Some("abc"));
        assert_eq!(bearer(&headers(&[("authorization", "bearer  abc ")])), Some("abc"));
        assert_eq!(bearer(&headers(&[("authorization", "Basic abc")])), None);
        assert_eq!(bearer(&headers(&[("authorization", "Bearer ")])), None);
        assert_eq!(bearer(&headers(&[])), None);
    }

    #[test]
    fn read_only_tokens_may_read_and_wait_but_not_change_tasks() {
        let call = |body: Value| Call::of(body.to_string().as_bytes());
        let tool =
            |name: &str| call(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}}));
        for read in READ_TOOLS {
            assert!(!tool(read).changes_tasks(), "{read}");
        }
        for write in ["ask", "run", "halt", "reply", "send", "notify", "anything-new"] {
            assert!(tool(write).changes_tasks(), "{write}");
        }
        assert!(call(json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {}})).changes_tasks());
        assert!(!call(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).changes_tasks());
        assert!(!call(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).changes_tasks());
        assert!(!Call::of(b"not json").changes_tasks());
        for (bad, code) in [
            (&b"not json"[..], StatusCode::BAD_REQUEST),
            (b"[1, 2]", StatusCode::BAD_REQUEST),
            (b"7", StatusCode::BAD_REQUEST),
        ] {
            assert_eq!(Call::read(bad).unwrap_err().into_response().status(), code);
        }
        for (wrong, code) in [
            (&br#"{"jsonrpc": "2.0", "id": 3}"#[..], -32600),
            (br#"{"jsonrpc": "1.0", "id": 3, "method": "x"}"#, -32600),
            (br#"{"jsonrpc": "2.0", "id": 3, "method": 7}"#, -32600),
        ] {
            assert_eq!(Call::read(wrong).unwrap_err().code, code, "{}", String::from_utf8_lossy(wrong));
        }
        assert!(Call::read(br#"{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}"#).is_ok());
        assert_eq!(tool("halt").label(), "tools/call halt");
    }

    #[test]
    fn hosts_and_origins_must_be_allowed() {
        let allowed: Vec<String> = ["localhost", "127.0.0.1", "::1", "agents.example:8443"].map(String::from).into();
        let ok = |pairs: &[(&'static str, &str)]| host_allowed(&headers(pairs), &allowed);
        assert!(ok(&[("host", "127.0.0.1:8080")]));
        assert!(ok(&[("host", "localhost")]));
        assert!(ok(&[("host", "[::1]:8080")]));
        assert!(ok(&[("host", "agents.example:8443")]));
        assert!(!ok(&[("host", "agents.example:9000")]));
        assert!(!ok(&[("host", "evil.example")]));
        assert!(!ok(&[("host", "evil.example:8080")]));
        assert!(!ok(&[]));
        assert!(ok(&[("host", "localhost:1"), ("origin", "http://localhost:3000")]));
        assert!(!ok(&[("host", "localhost:1"), ("origin", "https://evil.example")]));
        assert!(!ok(&[("host", "localhost:1"), ("origin", "garbage")]));
    }

    #[test]
    fn a_refusal_says_where_the_metadata_is() {
        let r = unauthorized("http://127.0.0.1:1", &Denied::Missing);
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let challenge = r.headers()[WWW_AUTHENTICATE].to_str().unwrap();
        assert_eq!(
            challenge,
            "Bearer resource_metadata=\"http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp\""
        );
        let r = unauthorized("http://h", &Denied::Revoked("ci".into()));
        assert!(r.headers()[WWW_AUTHENTICATE].to_str().unwrap().contains("error=\"invalid_token\""));
    }
}
