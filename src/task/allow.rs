//! A sandbox's network allow-list: each entry a `host:port` an agent may reach, the host a
//! name (`api.anthropic.com`), every name under a domain (`*.example.com`), or an address
//! (`127.0.0.1`, `[::1]`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// One entry of an allow-list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    host: Host,
    pub port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Host {
    Name(String),
    /// `*.example.com`: any name ending in `.example.com`.
    Under(String),
    Ip(IpAddr),
}

impl Endpoint {
    /// `host:port`, saying what is wrong with anything else.
    pub fn parse(entry: &str) -> Result<Endpoint, String> {
        let wrong = |why: &str| {
            format!(
                "network entry `{entry}` {why}: write `host:port` (`api.anthropic.com:443`, `*.example.com:443`, \
                 `127.0.0.1:8080`, `[::1]:8080`)"
            )
        };
        let Some((host, port)) = entry.rsplit_once(':') else { return Err(wrong("has no port")) };
        let port = match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(wrong("has no port number from 1 to 65535")),
        };
        let host = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Host::Ip(IpAddr::V6(v6.parse::<Ipv6Addr>().map_err(|_| wrong("has no IPv6 address in its brackets"))?))
        } else if let Ok(v4) = host.parse::<Ipv4Addr>() {
            Host::Ip(IpAddr::V4(v4))
        } else if host.contains(':') {
            return Err(wrong("names an IPv6 address without brackets"));
        } else {
            let (under, name) = match host.strip_prefix("*.") {
                Some(rest) => (true, rest),
                None => (false, host),
            };
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            let fits = |l: &str| {
                !l.is_empty() && l.len() <= 63 && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            };
            if name.is_empty() || !name.split('.').all(fits) {
                return Err(wrong("has no host name"));
            }
            // `1.2.3` or `*.0.1` is no name: the resolver would read it as an address.
            if name.rsplit('.').next().is_some_and(|last| last.chars().all(|c| c.is_ascii_digit())) {
                return Err(wrong("has neither a host name nor a whole IPv4 address"));
            }
            if under { Host::Under(name) } else { Host::Name(name) }
        };
        Ok(Endpoint { host, port })
    }

    /// Whether a connection to `host` (a name or an address, as a client asked for it) on
    /// `port` is one this entry allows.
    pub fn admits(&self, host: &str, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match &self.host {
            Host::Name(name) => host == *name,
            Host::Under(domain) => host.strip_suffix(domain.as_str()).is_some_and(|head| head.ends_with('.')),
            Host::Ip(ip) => host.parse::<IpAddr>().is_ok_and(|h| h == *ip),
        }
    }

    /// Whether it names every host under a domain (`*.example.com`), rather than one host.
    pub fn is_wildcard(&self) -> bool {
        matches!(self.host, Host::Under(_))
    }

    /// Whether it names `localhost`, which may be either loopback address.
    pub fn is_localhost(&self) -> bool {
        matches!(&self.host, Host::Name(n) if n == "localhost")
    }

    /// Where an agent reaches this entry directly, without a proxy, inside its own network
    /// (the same loopback address and port as outside): none for a host beyond this machine.
    pub fn on_loopback(&self) -> Vec<SocketAddr> {
        let at = |ip: IpAddr| SocketAddr::new(ip, self.port);
        match &self.host {
            Host::Ip(ip) if ip.is_loopback() => vec![at(*ip)],
            Host::Name(name) if name == "localhost" => {
                vec![at(Ipv4Addr::LOCALHOST.into()), at(Ipv6Addr::LOCALHOST.into())]
            }
            _ => Vec::new(),
        }
    }
}

/// `entries`, each parsed.
pub fn endpoints(entries: &[String]) -> Result<Vec<Endpoint>, String> {
    entries.iter().map(|e| Endpoint::parse(e)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_or_say_what_is_wrong() {
        for good in ["api.anthropic.com:443", "*.example.com:443", "127.0.0.1:8080", "[::1]:8080", "localhost:1"] {
            Endpoint::parse(good).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for (bad, says) in [
            ("api.anthropic.com", "has no port"),
            ("host:0", "no port number"),
            ("host:http", "no port number"),
            ("::1:80", "without brackets"),
            ("[nope]:80", "no IPv6 address"),
            (":80", "no host name"),
            ("a b:80", "no host name"),
            ("*.:80", "no host name"),
            ("1.2.3:80", "neither a host name nor a whole IPv4 address"),
            ("*.0.1:80", "neither a host name nor a whole IPv4 address"),
        ] {
            let e = Endpoint::parse(bad).unwrap_err();
            assert!(e.contains(says) && e.contains("write `host:port`"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_entry_admits_its_host_and_port_only() {
        let e = Endpoint::parse("API.example.com.:443").unwrap();
        assert!(e.admits("api.example.com", 443) && e.admits("Api.Example.Com.", 443));
        assert!(!e.admits("api.example.com", 80) && !e.admits("evil.api.example.com", 443));
        let e = Endpoint::parse("*.example.com:443").unwrap();
        assert!(e.admits("a.example.com", 443) && e.admits("a.b.example.com", 443));
        assert!(!e.admits("example.com", 443) && !e.admits("badexample.com", 443));
        let e = Endpoint::parse("[::1]:8080").unwrap();
        assert!(e.admits("[::1]", 8080) && e.admits("0:0:0:0:0:0:0:1", 8080) && !e.admits("127.0.0.1", 8080));
        // A name is not its address, nor an address a name.
        assert!(!Endpoint::parse("127.0.0.1:80").unwrap().admits("localhost", 80));
    }

    #[test]
    fn loopback_entries_are_reached_directly() {
        let v4: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert_eq!(Endpoint::parse("127.0.0.1:80").unwrap().on_loopback(), vec![v4]);
        assert_eq!(Endpoint::parse("localhost:80").unwrap().on_loopback().len(), 2);
        assert!(Endpoint::parse("10.0.0.1:80").unwrap().on_loopback().is_empty());
        assert!(Endpoint::parse("example.com:80").unwrap().on_loopback().is_empty());
    }
}
