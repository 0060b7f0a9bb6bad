//! The PROXY protocol header (HAProxy's, versions 1 and 2): a pure parser
//! over the bytes received so far, and encoders for tests and tools.
//!
//! Version 1 is one text line, at most [`V1_MAX_LEN`] bytes with its CRLF:
//! `PROXY TCP4 192.0.2.1 198.51.100.7 56324 7878\r\n` (or `TCP6`, or
//! `UNKNOWN` followed by anything). Version 2 is binary: the 12-byte
//! [`V2_SIGNATURE`], a version/command byte, an address family byte and a
//! big-endian u16 length, then that many bytes of addresses and optional
//! TLVs (at most [`V2_MAX_PAYLOAD`] here).
//!
//! [`parse`] never asks for a byte past the header's end: the reader can
//! feed it exactly the bytes it asks for and leave the client's hello in
//! the socket.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The first bytes of a version 1 header.
pub const V1_PREFIX: &[u8] = b"PROXY ";
/// Longest version 1 header, CRLF included (the specification's bound).
pub const V1_MAX_LEN: usize = 107;
/// The first 12 bytes of a version 2 header.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// Bytes of a version 2 header before its variable part.
pub const V2_FIXED_LEN: usize = 16;
/// Largest variable part (addresses and TLVs) of a version 2 header
/// accepted here; the format allows 65535, a proxy that sends no large
/// TLVs needs at most 216 (Unix socket paths).
pub const V2_MAX_PAYLOAD: usize = 1024;
/// Bytes [`parse`] asks for before it can tell a header from anything
/// else: the longest common length of the two prefixes that decides.
const DECIDE_LEN: usize = 5;

/// What a complete header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyHeader {
    /// 1 (text) or 2 (binary).
    pub version: u8,
    /// The client's address, as the proxy saw it; `None` for a v1
    /// `UNKNOWN`, a v2 `LOCAL` command (the proxy's own health checks) or
    /// an address family without IP addresses.
    pub source: Option<SocketAddr>,
    /// The address the client connected to, when `source` is known.
    pub destination: Option<SocketAddr>,
}

/// The bytes so far are not (the start of) a valid header.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The connection does not start with either signature.
    #[error("expected a PROXY protocol header, got bytes {}", hex(.found))]
    NotProxy {
        /// The bytes that decided it (at most 12).
        found: Vec<u8>,
    },
    /// A version 1 line without CRLF within [`V1_MAX_LEN`] bytes.
    #[error("PROXY v1 header without CRLF in its first {V1_MAX_LEN} bytes")]
    V1TooLong,
    /// A version 1 line that does not have the specified layout.
    #[error("malformed PROXY v1 header: {reason}")]
    V1Malformed {
        /// What is wrong.
        reason: &'static str,
    },
    /// A version 2 header whose variable part is over [`V2_MAX_PAYLOAD`].
    #[error(
        "PROXY v2 header announces {len} bytes of addresses and TLVs; at most {V2_MAX_PAYLOAD} accepted"
    )]
    V2TooLong {
        /// The announced length.
        len: usize,
    },
    /// A version 2 header that does not have the specified layout.
    #[error("malformed PROXY v2 header: {reason}")]
    V2Malformed {
        /// What is wrong.
        reason: &'static str,
    },
}

/// How far [`parse`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A whole header: what it says and how many bytes it took.
    Complete(ProxyHeader, usize),
    /// Not enough bytes yet: read exactly this many more (never past the
    /// header's end) and call again with all of them.
    Incomplete(usize),
}

/// Parses the start of a connection. `bytes` may end anywhere; extra
/// bytes after a complete header are left alone.
pub fn parse(bytes: &[u8]) -> Result<Parsed, HeaderError> {
    let decided = bytes.len().min(DECIDE_LEN);
    let v1 = bytes[..decided] == V1_PREFIX[..decided];
    let v2 = bytes[..decided] == V2_SIGNATURE[..decided];
    if bytes.len() < DECIDE_LEN && (v1 || v2) {
        return Ok(Parsed::Incomplete(DECIDE_LEN - bytes.len()));
    }
    if v1 {
        return parse_v1(bytes);
    }
    let signed = bytes.len().min(V2_SIGNATURE.len());
    if bytes[..signed] == V2_SIGNATURE[..signed] {
        return parse_v2(bytes);
    }
    Err(HeaderError::NotProxy {
        found: bytes[..signed].to_vec(),
    })
}

fn parse_v1(bytes: &[u8]) -> Result<Parsed, HeaderError> {
    if bytes.len() < V1_PREFIX.len() {
        return Ok(Parsed::Incomplete(V1_PREFIX.len() - bytes.len()));
    }
    if !bytes.starts_with(V1_PREFIX) {
        return Err(HeaderError::NotProxy {
            found: bytes[..V1_PREFIX.len()].to_vec(),
        });
    }
    // The CRLF must end by byte V1_MAX_LEN: the CR within the first
    // V1_MAX_LEN - 1 bytes.
    let scanned = &bytes[..bytes.len().min(V1_MAX_LEN - 1)];
    let Some(cr) = scanned.iter().position(|&byte| byte == b'\r') else {
        return match bytes.len() >= V1_MAX_LEN - 1 {
            true => Err(HeaderError::V1TooLong),
            false => Ok(Parsed::Incomplete(1)),
        };
    };
    let Some(&lf) = bytes.get(cr + 1) else {
        return Ok(Parsed::Incomplete(1));
    };
    if lf != b'\n' {
        return Err(HeaderError::V1Malformed {
            reason: "CR not followed by LF",
        });
    }
    let line = &bytes[V1_PREFIX.len()..cr];
    if !line.iter().all(|byte| (b' '..=b'~').contains(byte)) {
        return Err(HeaderError::V1Malformed {
            reason: "not printable ASCII",
        });
    }
    let line = String::from_utf8_lossy(line);
    let header = v1_fields(&line)?;
    Ok(Parsed::Complete(header, cr + 2))
}

/// The fields after `PROXY `, without the CRLF.
fn v1_fields(line: &str) -> Result<ProxyHeader, HeaderError> {
    let malformed = |reason| HeaderError::V1Malformed { reason };
    if line == "UNKNOWN" || line.starts_with("UNKNOWN ") {
        return Ok(ProxyHeader {
            version: 1,
            source: None,
            destination: None,
        });
    }
    let fields: Vec<&str> = line.split(' ').collect();
    let [family, source, destination, source_port, destination_port] = fields[..] else {
        return Err(malformed(
            "expected TCP4|TCP6 SOURCE DESTINATION SPORT DPORT, single spaces",
        ));
    };
    let address = |text: &str| -> Result<IpAddr, HeaderError> {
        match family {
            "TCP4" => text
                .parse::<Ipv4Addr>()
                .map(IpAddr::V4)
                .map_err(|_| malformed("not an IPv4 address")),
            "TCP6" => text
                .parse::<Ipv6Addr>()
                .map(IpAddr::V6)
                .map_err(|_| malformed("not an IPv6 address")),
            _ => Err(malformed("protocol must be TCP4, TCP6 or UNKNOWN")),
        }
    };
    let port = |text: &str| -> Result<u16, HeaderError> {
        let digits =
            !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit());
        let leading_zero = text.len() > 1 && text.starts_with('0');
        match digits && !leading_zero {
            true => text.parse().map_err(|_| malformed("port over 65535")),
            false => Err(malformed("a port must be 0 to 65535 in decimal")),
        }
    };
    Ok(ProxyHeader {
        version: 1,
        source: Some(SocketAddr::new(address(source)?, port(source_port)?)),
        destination: Some(SocketAddr::new(
            address(destination)?,
            port(destination_port)?,
        )),
    })
}

fn parse_v2(bytes: &[u8]) -> Result<Parsed, HeaderError> {
    let malformed = |reason| HeaderError::V2Malformed { reason };
    if bytes.len() < V2_FIXED_LEN {
        return Ok(Parsed::Incomplete(V2_FIXED_LEN - bytes.len()));
    }
    let version_command = bytes[12];
    let family = bytes[13];
    let len = usize::from(u16::from_be_bytes([bytes[14], bytes[15]]));
    if version_command >> 4 != 2 {
        return Err(malformed("version nibble is not 2"));
    }
    let local = match version_command & 0x0f {
        0 => true,
        1 => false,
        _ => return Err(malformed("command is neither LOCAL (0) nor PROXY (1)")),
    };
    if len > V2_MAX_PAYLOAD {
        return Err(HeaderError::V2TooLong { len });
    }
    let total = V2_FIXED_LEN + len;
    if bytes.len() < total {
        return Ok(Parsed::Incomplete(total - bytes.len()));
    }
    let payload = &bytes[V2_FIXED_LEN..total];
    let complete = |source, destination| {
        Ok(Parsed::Complete(
            ProxyHeader {
                version: 2,
                source,
                destination,
            },
            total,
        ))
    };
    // LOCAL: the proxy speaks for itself (health checks); whatever the
    // family says is ignored, as the specification asks.
    if local {
        return complete(None, None);
    }
    let transport = family & 0x0f;
    if !matches!(transport, 0 | 1) {
        return Err(malformed("transport is not STREAM (only TCP is served)"));
    }
    match family >> 4 {
        0 => complete(None, None),
        1 => {
            let Some(addresses) = payload.get(..12) else {
                return Err(malformed("TCP4 needs 12 bytes of addresses"));
            };
            let ip = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    addresses[at],
                    addresses[at + 1],
                    addresses[at + 2],
                    addresses[at + 3],
                ))
            };
            let port = |at: usize| u16::from_be_bytes([addresses[at], addresses[at + 1]]);
            complete(
                Some(SocketAddr::new(ip(0), port(8))),
                Some(SocketAddr::new(ip(4), port(10))),
            )
        }
        2 => {
            let Some(addresses) = payload.get(..36) else {
                return Err(malformed("TCP6 needs 36 bytes of addresses"));
            };
            let ip = |at: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&addresses[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            let port = |at: usize| u16::from_be_bytes([addresses[at], addresses[at + 1]]);
            complete(
                Some(SocketAddr::new(ip(0), port(32))),
                Some(SocketAddr::new(ip(16), port(34))),
            )
        }
        3 => match payload.len() >= 216 {
            // Unix sockets carry paths, not addresses: no client address.
            true => complete(None, None),
            false => Err(malformed("UNIX needs 216 bytes of addresses")),
        },
        _ => Err(malformed("unknown address family")),
    }
}

impl ProxyHeader {
    /// A header for a TCP connection from `source` to `destination` (both
    /// of one family), or for an unknown one.
    pub fn tcp(source: SocketAddr, destination: SocketAddr) -> ProxyHeader {
        ProxyHeader {
            version: 2,
            source: Some(source),
            destination: Some(destination),
        }
    }

    /// The version 1 line. Mixed address families encode as `UNKNOWN`.
    pub fn to_v1(&self) -> Vec<u8> {
        match (self.source, self.destination) {
            (Some(SocketAddr::V4(source)), Some(SocketAddr::V4(destination))) => format!(
                "PROXY TCP4 {} {} {} {}\r\n",
                source.ip(),
                destination.ip(),
                source.port(),
                destination.port()
            ),
            (Some(SocketAddr::V6(source)), Some(SocketAddr::V6(destination))) => format!(
                "PROXY TCP6 {} {} {} {}\r\n",
                source.ip(),
                destination.ip(),
                source.port(),
                destination.port()
            ),
            _ => "PROXY UNKNOWN\r\n".to_owned(),
        }
        .into_bytes()
    }

    /// The version 2 header: PROXY with TCP4 or TCP6 addresses, or LOCAL
    /// without any (mixed families too).
    pub fn to_v2(&self) -> Vec<u8> {
        let mut out = V2_SIGNATURE.to_vec();
        let (command, family, payload) = match (self.source, self.destination) {
            (Some(SocketAddr::V4(source)), Some(SocketAddr::V4(destination))) => {
                let mut payload = Vec::with_capacity(12);
                payload.extend(source.ip().octets());
                payload.extend(destination.ip().octets());
                payload.extend(source.port().to_be_bytes());
                payload.extend(destination.port().to_be_bytes());
                (0x21, 0x11, payload)
            }
            (Some(SocketAddr::V6(source)), Some(SocketAddr::V6(destination))) => {
                let mut payload = Vec::with_capacity(36);
                payload.extend(source.ip().octets());
                payload.extend(destination.ip().octets());
                payload.extend(source.port().to_be_bytes());
                payload.extend(destination.port().to_be_bytes());
                (0x21, 0x21, payload)
            }
            _ => (0x20, 0x00, Vec::new()),
        };
        out.push(command);
        out.push(family);
        out.extend((payload.len() as u16).to_be_bytes());
        out.extend(payload);
        out
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("address")
    }

    fn complete(bytes: &[u8]) -> (ProxyHeader, usize) {
        match parse(bytes) {
            Ok(Parsed::Complete(header, len)) => (header, len),
            other => panic!("expected a header from {bytes:?}, got {other:?}"),
        }
    }

    /// Feeds `bytes` the way the reader does: exactly what is asked for.
    fn stepwise(bytes: &[u8]) -> Result<(ProxyHeader, usize), HeaderError> {
        let mut have = 0;
        loop {
            match parse(&bytes[..have])? {
                Parsed::Complete(header, len) => return Ok((header, len)),
                Parsed::Incomplete(more) => {
                    assert!(more > 0);
                    have += more;
                    assert!(have <= bytes.len(), "asked past the input");
                }
            }
        }
    }

    #[test]
    fn v1_tcp4_tcp6_and_unknown() {
        let line = b"PROXY TCP4 192.0.2.1 198.51.100.7 56324 7878\r\nAESD";
        let (header, len) = complete(line);
        assert_eq!(len, line.len() - 4, "the hello is left alone");
        assert_eq!(header.source, Some(addr("192.0.2.1:56324")));
        assert_eq!(header.destination, Some(addr("198.51.100.7:7878")));
        let (header, _) = complete(b"PROXY TCP6 2001:db8::1 ::1 1 65535\r\n");
        assert_eq!(header.source, Some(addr("[2001:db8::1]:1")));
        let (header, len) = complete(b"PROXY UNKNOWN\r\n");
        assert_eq!((header.source, len), (None, 15));
        let (header, _) = complete(b"PROXY UNKNOWN whatever 1 2\r\n");
        assert_eq!(header.version, 1);
        assert_eq!(header.source, None);
    }

    #[test]
    fn v2_proxy_and_local() {
        let source = addr("203.0.113.9:40000");
        let destination = addr("10.0.0.2:7878");
        let mut bytes = ProxyHeader::tcp(source, destination).to_v2();
        assert_eq!(bytes.len(), 28);
        bytes.extend(b"AESD");
        let (header, len) = complete(&bytes);
        assert_eq!((header.version, len), (2, 28));
        assert_eq!(header.source, Some(source));
        assert_eq!(header.destination, Some(destination));
        let six = ProxyHeader::tcp(addr("[fd00::5]:9"), addr("[fd00::1]:7878"));
        assert_eq!(complete(&six.to_v2()).0, six);
        let local = ProxyHeader {
            version: 2,
            source: None,
            destination: None,
        };
        assert_eq!(complete(&local.to_v2()), (local, 16));
        // TLVs after the addresses are skipped.
        let mut with_tlv = ProxyHeader::tcp(source, destination).to_v2();
        with_tlv[15] += 5;
        with_tlv.extend([0x04, 0x00, 0x02, b'o', b'k']);
        assert_eq!(complete(&with_tlv).1, 33);
    }

    #[test]
    fn encoders_round_trip_through_the_stepwise_parser() {
        let header = ProxyHeader::tcp(addr("127.0.0.2:5555"), addr("127.0.0.1:7878"));
        let (v1, len) = stepwise(&header.to_v1()).expect("v1");
        assert_eq!((v1.source, len), (header.source, header.to_v1().len()));
        let (v2, len) = stepwise(&header.to_v2()).expect("v2");
        assert_eq!((v2, len), (header, 28));
    }

    #[test]
    fn it_never_asks_past_the_end_and_decides_early() {
        assert_eq!(parse(b""), Ok(Parsed::Incomplete(5)));
        assert_eq!(parse(b"PRO"), Ok(Parsed::Incomplete(2)));
        assert_eq!(parse(b"PROXY"), Ok(Parsed::Incomplete(1)));
        assert_eq!(parse(b"PROXY TCP4"), Ok(Parsed::Incomplete(1)));
        assert_eq!(parse(b"\r\n\r\n\0"), Ok(Parsed::Incomplete(11)));
        // An aesd hello from a client that skipped the proxy: refused on
        // its first byte, without waiting for more.
        assert!(matches!(
            parse(b"AESD\0\x01\0\x01"),
            Err(HeaderError::NotProxy { .. })
        ));
        assert!(matches!(parse(b"A"), Err(HeaderError::NotProxy { .. })));
        assert!(matches!(parse(b"PROXZ"), Err(HeaderError::NotProxy { .. })));
        assert!(matches!(
            parse(b"\r\n\r\n\0\r\nQUIX"),
            Err(HeaderError::NotProxy { .. })
        ));
    }

    #[test]
    fn malformed_headers_are_refused() {
        let mut long = b"PROXY UNKNOWN ".to_vec();
        long.resize(V1_MAX_LEN, b'x');
        assert_eq!(parse(&long), Err(HeaderError::V1TooLong));
        long.truncate(V1_MAX_LEN - 1);
        long.push(b'\r');
        assert_eq!(parse(&long), Err(HeaderError::V1TooLong), "no room for LF");
        // Exactly 107 bytes with the CRLF is the longest allowed; 108 is not
        // (found by the fuzzer: the CR at byte 107 was accepted).
        let mut longest = b"PROXY UNKNOWN ".to_vec();
        longest.resize(V1_MAX_LEN - 2, b'x');
        longest.extend(b"\r\n");
        assert_eq!(stepwise(&longest).map(|(_, len)| len), Ok(V1_MAX_LEN));
        longest.insert(20, b'x');
        assert_eq!(parse(&longest), Err(HeaderError::V1TooLong));
        for cut in 0..longest.len() {
            assert!(
                matches!(
                    parse(&longest[..cut]),
                    Ok(Parsed::Incomplete(_)) | Err(HeaderError::V1TooLong)
                ),
                "{cut}"
            );
        }
        for bad in [
            &b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r"[..],
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
            b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
            b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
            b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
            b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\xff\r\n",
        ] {
            assert!(
                matches!(parse(bad), Err(HeaderError::V1Malformed { .. })),
                "{:?} → {:?}",
                String::from_utf8_lossy(bad),
                parse(bad)
            );
        }
        let good = ProxyHeader::tcp(addr("1.2.3.4:1"), addr("5.6.7.8:2")).to_v2();
        let with = |at: usize, value: u8| {
            let mut bytes = good.clone();
            bytes[at] = value;
            parse(&bytes)
        };
        assert!(matches!(
            with(12, 0x11),
            Err(HeaderError::V2Malformed { .. })
        ));
        assert!(matches!(
            with(12, 0x22),
            Err(HeaderError::V2Malformed { .. })
        ));
        assert!(matches!(
            with(13, 0x12),
            Err(HeaderError::V2Malformed { .. })
        ));
        assert!(matches!(
            with(13, 0x41),
            Err(HeaderError::V2Malformed { .. })
        ));
        assert!(matches!(with(15, 4), Err(HeaderError::V2Malformed { .. })));
        assert_eq!(with(14, 0xff), Err(HeaderError::V2TooLong { len: 0xff0c }));
    }
}
