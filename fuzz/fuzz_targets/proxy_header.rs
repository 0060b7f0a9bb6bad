//! Fuzzes the PROXY protocol header parser (`aesd_core::proxy_header`)
//! with arbitrary connection starts. Checks, besides "never panics":
//! * a complete header takes no more bytes than it was given, and parses
//!   the same from exactly those bytes;
//! * every shorter prefix of it is "incomplete" asking for at most the
//!   bytes still missing: the reader never reads past the header into
//!   the client's hello;
//! * a v1 header is at most 107 bytes, a v2 at most 16 + 1024;
//! * the carried addresses survive re-encoding as v1 and v2.

#![no_main]

use aesd_core::proxy_header::{
    self as header, Parsed, ProxyHeader, V1_MAX_LEN, V2_FIXED_LEN, V2_MAX_PAYLOAD,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(Parsed::Complete(found, len)) = header::parse(data) else {
        if let Ok(Parsed::Incomplete(more)) = header::parse(data) {
            assert!(more > 0, "incomplete must ask for at least one byte");
        }
        return;
    };
    assert!(len <= data.len(), "took {len} of {} bytes", data.len());
    assert_eq!(
        header::parse(&data[..len]),
        Ok(Parsed::Complete(found, len))
    );
    match found.version {
        1 => assert!(len <= V1_MAX_LEN),
        2 => assert!(len <= V2_FIXED_LEN + V2_MAX_PAYLOAD),
        other => panic!("version {other}"),
    }
    for cut in 0..len {
        match header::parse(&data[..cut]) {
            Ok(Parsed::Incomplete(more)) => assert!(
                cut + more <= len,
                "asked for {more} bytes at {cut} of a {len}-byte header"
            ),
            other => panic!("prefix of {cut} bytes gave {other:?}"),
        }
    }
    if let (Some(source), Some(destination)) = (found.source, found.destination) {
        let again = ProxyHeader::tcp(source, destination);
        for encoded in [again.to_v1(), again.to_v2()] {
            match header::parse(&encoded) {
                Ok(Parsed::Complete(parsed, used)) => {
                    assert_eq!(used, encoded.len());
                    assert_eq!(
                        (parsed.source, parsed.destination),
                        (Some(source), Some(destination))
                    );
                }
                other => panic!("re-encoded {again:?} gave {other:?}"),
            }
        }
    }
});
