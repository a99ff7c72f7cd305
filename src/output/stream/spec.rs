//! Stream addresses: `osc://HOST:PORT` (TUIO 1.1 over OSC/UDP; `tuio://` is the same),
//! `udp://HOST:PORT` (one JSON object per frame over UDP) and `ws://HOST:PORT` (a WebSocket
//! server markerscope runs; clients connect to it, at most `DEFAULT_MAX_CLIENTS` at once, or
//! N with `ws://HOST:PORT?max_clients=N`).

use crate::error::{Error, Result};
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// The schemes `StreamSpec::parse` accepts, for messages.
pub const SCHEMES: &str =
    "osc://HOST:PORT (TUIO), udp://HOST:PORT (JSON) or ws://HOST:PORT (WebSocket server)";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// TUIO 1.1 `/tuio/2Dblb` bundles, OSC 1.0 over UDP.
    Tuio,
    /// One JSON object per frame, UDP datagrams.
    JsonUdp,
    /// One JSON object per frame, text messages to every connected WebSocket client.
    WebSocket,
}

/// WebSocket clients served at once unless the address says otherwise: each costs a thread and
/// a copy of the frames on their way to it.
pub const DEFAULT_MAX_CLIENTS: usize = 16;

/// A parsed stream address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSpec {
    /// The address as the user wrote it.
    pub url: String,
    pub kind: StreamKind,
    pub host: String,
    pub port: u16,
    /// WebSocket clients served at once (`?max_clients=N`; other streams have none).
    pub max_clients: usize,
}

impl fmt::Display for StreamSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

impl StreamSpec {
    pub fn parse(url: &str) -> Result<StreamSpec> {
        let url = url.trim();
        let bad = |why: String| stream_error(url, why);
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad(format!("not an address; expected {SCHEMES}")))?;
        let kind = match scheme.to_ascii_lowercase().as_str() {
            "osc" | "tuio" => StreamKind::Tuio,
            "udp" => StreamKind::JsonUdp,
            "ws" => StreamKind::WebSocket,
            "wss" => {
                return Err(bad(
                    "secure WebSockets (wss) are not served; use ws:// on a trusted network".into(),
                ))
            }
            other => return Err(bad(format!("unknown scheme '{other}'; expected {SCHEMES}"))),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, Some(query)),
            None => (rest, None),
        };
        let max_clients = match (query, kind) {
            (None, _) => DEFAULT_MAX_CLIENTS,
            (Some(q), StreamKind::WebSocket) => q
                .strip_prefix("max_clients=")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| (1..=1024).contains(n))
                .ok_or_else(|| {
                    bad(format!(
                        "'?{q}': the only option is max_clients=N, N in 1..=1024"
                    ))
                })?,
            (Some(q), _) => return Err(bad(format!("'?{q}': options are for ws:// streams only"))),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains('/') {
            return Err(bad("a path is not supported; give HOST:PORT only".into()));
        }
        let (host, port) = match authority.strip_prefix('[') {
            // [IPv6]:PORT
            Some(v6) => {
                let (host, port) = v6
                    .split_once("]:")
                    .ok_or_else(|| bad("expected [IPv6]:PORT".into()))?;
                (host, port)
            }
            None => authority
                .rsplit_once(':')
                .ok_or_else(|| bad("no port; give HOST:PORT, e.g. 127.0.0.1:3333".into()))?,
        };
        if host.is_empty() {
            return Err(bad("no host; give HOST:PORT, e.g. 127.0.0.1:3333".into()));
        }
        // Digits only: Rust's parser would take a sign ("+80").
        let port: u16 = Some(port)
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse().ok())
            .filter(|&p| p != 0)
            .ok_or_else(|| bad(format!("port '{port}' is not a number in 1..=65535")))?;
        Ok(StreamSpec {
            url: url.to_string(),
            kind,
            host: host.to_string(),
            port,
            max_clients,
        })
    }

    /// The socket address the host name resolves to (the first one).
    pub fn resolve(&self) -> Result<SocketAddr> {
        let mut addrs = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| stream_error(&self.url, format!("cannot resolve '{}': {e}", self.host)))?;
        addrs.next().ok_or_else(|| {
            stream_error(&self.url, format!("'{}' resolves to no address", self.host))
        })
    }
}

pub fn stream_error(url: &str, why: impl Into<String>) -> Error {
    Error::Stream {
        url: url.to_string(),
        why: why.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_scheme_and_ipv6() {
        let s = StreamSpec::parse("osc://127.0.0.1:3333").unwrap();
        assert_eq!(
            (s.kind, s.host.as_str(), s.port),
            (StreamKind::Tuio, "127.0.0.1", 3333)
        );
        assert_eq!(
            StreamSpec::parse("tuio://localhost:3333/").unwrap().kind,
            StreamKind::Tuio
        );
        assert_eq!(
            StreamSpec::parse("udp://h:1").unwrap().kind,
            StreamKind::JsonUdp
        );
        let ws = StreamSpec::parse("WS://[::1]:9000").unwrap();
        assert_eq!(
            (ws.kind, ws.host.as_str(), ws.port),
            (StreamKind::WebSocket, "::1", 9000)
        );
        assert_eq!(ws.max_clients, DEFAULT_MAX_CLIENTS);
        let capped = StreamSpec::parse("ws://127.0.0.1:9000?max_clients=3").unwrap();
        assert_eq!((capped.port, capped.max_clients), (9000, 3));
    }

    #[test]
    fn malformed_addresses_say_what_is_wrong() {
        for (url, says) in [
            ("127.0.0.1:3333", "not an address"),
            ("http://h:80", "unknown scheme 'http'"),
            ("osc://h", "no port"),
            ("osc://:3333", "no host"),
            ("osc://h:99999", "1..=65535"),
            ("osc://h:0", "1..=65535"),
            ("ws://h:9000/feed", "path"),
            ("wss://h:9000", "wss"),
            ("udp://127.0.0.1:+80", "1..=65535"),
            ("osc://h:-1", "1..=65535"),
            ("ws://h:9000?max_clients=0", "max_clients"),
            ("ws://h:9000?clients=3", "max_clients"),
            ("udp://h:9000?max_clients=3", "ws://"),
        ] {
            let err = StreamSpec::parse(url).unwrap_err().to_string();
            assert!(err.contains(url) && err.contains(says), "{url}: {err}");
        }
    }
}
