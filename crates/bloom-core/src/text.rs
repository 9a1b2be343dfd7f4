//! The text form of a value: `\x` and lower-case hex, like bytea's hex output.

use crate::error::Error;

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `\x` followed by the bytes in lower-case hex.
pub fn to_text(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 + 2 * bytes.len());
    out.push_str("\\x");
    for &b in bytes {
        out.push(char::from(HEX_DIGITS[usize::from(b >> 4)]));
        out.push(char::from(HEX_DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The bytes of a `\x...` text (either case of hex digits). Checks only the hex; callers
/// then validate the value itself with `BloomView::parse_validated`.
pub fn from_text(s: &str) -> Result<Vec<u8>, Error> {
    let hex = s.strip_prefix("\\x").ok_or_else(|| {
        Error::Malformed("a bloom filter's text form starts with \\x followed by hex digits".into())
    })?;
    let (pairs, odd) = hex.as_bytes().as_chunks::<2>();
    if !odd.is_empty() {
        return Err(Error::Malformed(format!(
            "a bloom filter's text form needs an even number of hex digits after \\x, found {}",
            hex.len()
        )));
    }
    pairs
        .iter()
        .enumerate()
        .map(|(i, &[hi, lo])| match (hex_value(hi), hex_value(lo)) {
            (Some(hi), Some(lo)) => Ok(hi << 4 | lo),
            _ => Err(Error::Malformed(format!(
                "invalid hex digit in a bloom filter's text form near position {}",
                2 + 2 * i
            ))),
        })
        .collect()
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes: Vec<u8> = (0..=255).collect();
        let text = to_text(&bytes);
        assert!(text.starts_with("\\x000102"));
        assert_eq!(from_text(&text), Ok(bytes));
        assert_eq!(to_text(&[]), "\\x");
        assert_eq!(from_text("\\x"), Ok(vec![]));
    }

    #[test]
    fn accepts_upper_case() {
        assert_eq!(from_text("\\xABcd0F"), Ok(vec![0xab, 0xcd, 0x0f]));
    }

    #[test]
    fn rejects_bad_text() {
        for bad in [
            "", "x00", "\\X00", "00", "\\x0", "\\x0g", "\\x 00", "\\xé0", "\\x00\n",
        ] {
            assert!(
                matches!(from_text(bad), Err(Error::Malformed(_))),
                "{bad:?}"
            );
        }
    }
}
