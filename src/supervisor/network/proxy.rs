//! The HTTP proxy a sandboxed agent reaches its allow-list's hosts through: `CONNECT host:port`
//! (HTTPS and anything else over TCP) and plain `http://` requests, each let through only to a
//! `host:port` the list names, and refused with a 403 that says so otherwise.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{Admitted, Plan};

/// The longest request head taken, and how long it may take to come.
const MAX_HEAD: usize = 64 * 1024;
const HEAD_TIME: Duration = Duration::from_secs(30);
const CONNECT_TIME: Duration = Duration::from_secs(10);

/// Serve one connection of the agent's to the proxy.
pub(super) fn serve(plan: &Plan, mut conn: TcpStream) {
    let (head, rest) = match read_head(&mut conn) {
        Some(read) => read,
        None => return answer(&mut conn, "400 Bad Request", "agentctl's sandbox proxy got no request head"),
    };
    let mut headers = [httparse::EMPTY_HEADER; 96];
    let mut req = httparse::Request::new(&mut headers);
    let (Ok(httparse::Status::Complete(_)), Some(method), Some(target)) = (req.parse(&head), req.method, req.path)
    else {
        return answer(&mut conn, "400 Bad Request", "agentctl's sandbox proxy cannot read that request");
    };
    let (host, port, first) = if method.eq_ignore_ascii_case("CONNECT") {
        match authority(target, None) {
            Some((host, port)) => (host, port, Vec::new()),
            None => return answer(&mut conn, "400 Bad Request", "CONNECT needs host:port"),
        }
    } else {
        let url = target.get(..7).filter(|s| s.eq_ignore_ascii_case("http://")).map(|_| &target[7..]);
        let Some(url) = url else {
            let why = "agentctl's sandbox proxy takes `http://` URLs, and CONNECT for anything else (https)";
            return answer(&mut conn, "400 Bad Request", why);
        };
        let split = url.find(['/', '?']).unwrap_or(url.len());
        let (Some((host, port)), path) = (authority(&url[..split], Some(80)), &url[split..]) else {
            return answer(&mut conn, "400 Bad Request", "that URL names no host");
        };
        let path = if path.starts_with('/') { path.to_owned() } else { format!("/{path}") };
        let authority = &url[..split];
        (host, port, origin_request(method, &path, authority, req.version.unwrap_or(1), req.headers))
    };
    let Some(admitted) = plan.admits(&host, port) else {
        super::refused(&format!("{host}:{port}"));
        let why = format!(
            "agentctl's sandbox does not let this agent reach {host}:{port}: its network allow-list is {}",
            plan.allowed_line()
        );
        return answer(&mut conn, "403 Forbidden", &why);
    };
    let upstream = match connect(&host, port, admitted == Admitted::ByWildcard) {
        Ok(s) => s,
        Err(e) => return answer(&mut conn, "502 Bad Gateway", &format!("cannot reach {host}:{port}: {e}")),
    };
    let _ = conn.set_read_timeout(None);
    if first.is_empty() && conn.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").is_err() {
        return;
    }
    relay(conn, upstream, &[first, rest].concat());
}

/// The request head, and whatever came after it, read from `conn`.
fn read_head(conn: &mut TcpStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    // One deadline for the whole head, not for each read: a byte at a time holds nothing long.
    let deadline = Instant::now() + HEAD_TIME;
    loop {
        let left = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero())?;
        conn.set_read_timeout(Some(left)).ok()?;
        let n = conn.read(&mut chunk).ok().filter(|&n| n > 0)?;
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = memchr::memmem::find(&buf[from..], b"\r\n\r\n") {
            let end = from + at + 4;
            let rest = buf.split_off(end);
            return Some((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
    }
}

/// `host:port` (the port `default` where it may be left out), the host as written.
fn authority(text: &str, default: Option<u16>) -> Option<(String, u16)> {
    let text = text.rsplit_once('@').map_or(text, |(_, h)| h);
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => (h, p.parse().ok()?),
        _ => (text, default?),
    };
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// A plain request's head as its server takes it: the path alone on the first line, `Host`
/// the URL's (RFC 9112 §3.2.2: not another virtual host of the server than the one admitted),
/// the proxy's own headers dropped, and the connection closed after its answer (so that the
/// next request, maybe to another host, comes through the proxy's check again).
fn origin_request(method: &str, path: &str, authority: &str, version: u8, headers: &[httparse::Header]) -> Vec<u8> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let mut out = format!("{method} {path} HTTP/1.{version}\r\nHost: {authority}\r\n").into_bytes();
    let hop = ["host", "connection", "proxy-connection", "keep-alive", "proxy-authorization"];
    for h in headers.iter().filter(|h| !hop.iter().any(|n| h.name.eq_ignore_ascii_case(n))) {
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// A connection to `host:port`, trying each of its addresses; with `beyond`, only those beyond
/// this machine (a name a wildcard admitted may not lead back to its loopback).
fn connect(host: &str, port: u16, beyond: bool) -> std::io::Result<TcpStream> {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "the name has no address");
    let here = |ip: IpAddr| ip.is_loopback() || ip.is_unspecified();
    for addr in (bare, port).to_socket_addrs()? {
        if beyond && here(addr.ip()) {
            last = std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("{host} is this machine ({}), which a wildcard entry does not admit", addr.ip()),
            );
            continue;
        }
        match TcpStream::connect_timeout(&addr, CONNECT_TIME) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Answer `status` with `why` as its text, and close.
fn answer(conn: &mut TcpStream, status: &str, why: &str) {
    let body = format!("{why}\n");
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all([head.as_bytes(), body.as_bytes()].concat().as_slice());
    let _ = conn.shutdown(Shutdown::Write);
}

/// Copy each way between `a` and `b` until both have ended, `first` sent to `b` before
/// anything else.
pub(super) fn relay(a: TcpStream, b: TcpStream, first: &[u8]) {
    let (Ok(mut a2), Ok(mut b2)) = (a.try_clone(), b.try_clone()) else { return };
    if !first.is_empty() && (&b).write_all(first).is_err() {
        return;
    }
    let there = std::thread::Builder::new().stack_size(64 * 1024).spawn(move || {
        let copied = std::io::copy(&mut a2, &mut b2);
        close(&a2, &b2, copied.is_ok());
    });
    let copied = std::io::copy(&mut &b, &mut &a);
    close(&b, &a, copied.is_ok());
    if let Ok(t) = there {
        let _ = t.join();
    }
}

/// After copying `from` to `to`: pass its end on, or on an error, end both ways at once.
fn close(from: &TcpStream, to: &TcpStream, clean: bool) {
    match clean {
        true => {
            let _ = to.shutdown(Shutdown::Write);
        }
        false => {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_and_plain_requests() {
        assert_eq!(authority("example.com:443", None), Some(("example.com".into(), 443)));
        assert_eq!(authority("[::1]:8080", None), Some(("[::1]".into(), 8080)));
        assert_eq!(authority("[::1]", Some(80)), Some(("[::1]".into(), 80)));
        assert_eq!(authority("user:pw@example.com", Some(80)), Some(("example.com".into(), 80)));
        assert_eq!(authority("example.com", None), None);
        let headers = [
            httparse::Header { name: "Host", value: b"other.example.com" },
            httparse::Header { name: "Proxy-Connection", value: b"keep-alive" },
            httparse::Header { name: "connection", value: b"keep-alive" },
        ];
        let head = origin_request("GET", "/x?y", "u:p@example.com:8080", 1, &headers);
        let said = "GET /x?y HTTP/1.1\r\nHost: example.com:8080\r\nConnection: close\r\n\r\n";
        assert_eq!(String::from_utf8(head).unwrap(), said);
    }
}
