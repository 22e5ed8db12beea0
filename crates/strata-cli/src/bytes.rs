//! How keys and values cross the command line: text or hex in, escaped text or hex out.
//!
//! Text output is lossless and unambiguous: valid UTF-8 is printed as is, except that a
//! backslash is doubled, tab, newline and carriage return become `\t`, `\n`, `\r`, other
//! control characters become `\xNN` (or `\u{NN}` above ASCII), and every byte that is not
//! part of valid UTF-8 becomes `\xNN`. So each printed key or value stays on one line and
//! never contains a raw tab, which keeps `key\tvalue` output parseable.

use std::fmt::Write as _;

/// How keys and values are read from arguments and printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 text in, escaped text out.
    Text,
    /// Hex digits in (optional `0x` prefix), lowercase hex out.
    Hex,
}

impl Encoding {
    /// `Hex` when `hex` is set, else `Text`.
    pub fn new(hex: bool) -> Self {
        if hex { Encoding::Hex } else { Encoding::Text }
    }

    /// The bytes an argument stands for; `what` names the argument in the error.
    pub fn decode(self, what: &str, arg: &str) -> Result<Vec<u8>, String> {
        match self {
            Encoding::Text => Ok(arg.as_bytes().to_vec()),
            Encoding::Hex => parse_hex(arg).map_err(|e| format!("{what} is not valid hex: {e}")),
        }
    }

    /// Bytes as printed on one line of output.
    pub fn encode(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Text => escape(bytes),
            Encoding::Hex => to_hex(bytes),
        }
    }

    /// Bytes quoted for an error message.
    pub fn quote(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Text => format!("\"{}\"", escape(bytes)),
            Encoding::Hex => format!("0x{}", to_hex(bytes)),
        }
    }
}

/// Escapes bytes for printing (see the module documentation for the rules).
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '\t' => s.push_str("\\t"),
                '\n' => s.push_str("\\n"),
                '\r' => s.push_str("\\r"),
                c if c.is_ascii_control() => {
                    let _ = write!(s, "\\x{:02x}", c as u32);
                }
                c if c.is_control() => {
                    let _ = write!(s, "\\u{{{:x}}}", c as u32);
                }
                c => s.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

/// Lowercase hex, two digits per byte.
pub fn to_hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// Parses hex digits (either case, optional `0x` prefix, even count) into bytes.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let digits = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    hex::decode(digits).map_err(|e| match e {
        hex::FromHexError::InvalidHexCharacter { c, index } => {
            format!("invalid hex digit {c:?} at position {}", index + 1)
        }
        hex::FromHexError::OddLength => format!("odd number of hex digits ({})", digits.chars().count()),
        e => e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_keeps_plain_text_and_unicode() {
        assert_eq!(escape(b"hello world"), "hello world");
        assert_eq!(escape("héllo 日本".as_bytes()), "héllo 日本");
        assert_eq!(escape(b""), "");
    }

    #[test]
    fn escape_shows_invalid_utf8_as_hex_bytes() {
        assert_eq!(escape(b"a\xffb"), "a\\xffb");
        assert_eq!(escape(b"\x80\x81"), "\\x80\\x81");
        // A truncated multi-byte sequence: both bytes escaped, following text intact.
        assert_eq!(escape(b"\xe6\x97x"), "\\xe6\\x97x");
        // Valid UTF-8 around invalid bytes survives.
        assert_eq!(escape("é\u{0}".as_bytes()), "é\\x00");
    }

    #[test]
    fn escape_is_unambiguous_and_single_line() {
        // A literal backslash sequence differs from an escaped byte.
        assert_eq!(escape(b"\\xff"), "\\\\xff");
        assert_ne!(escape(b"\\xff"), escape(b"\xff"));
        assert_eq!(escape(b"a\tb\nc\rd"), "a\\tb\\nc\\rd");
        assert_eq!(escape(b"\x01\x7f"), "\\x01\\x7f");
        assert_eq!(escape("\u{85}".as_bytes()), "\\u{85}");
        let e = escape(b"x\ty\nz\x00\xff");
        assert!(!e.contains('\t') && !e.contains('\n'));
    }

    #[test]
    fn hex_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(parse_hex(&to_hex(&all)).unwrap(), all);
        assert_eq!(to_hex(b"\x00\xab\x10"), "00ab10");
        assert_eq!(parse_hex("00AB10").unwrap(), b"\x00\xab\x10");
        assert_eq!(parse_hex("0xff").unwrap(), b"\xff");
        assert_eq!(parse_hex("0X0a").unwrap(), b"\x0a");
        assert_eq!(parse_hex("").unwrap(), b"");
    }

    #[test]
    fn bad_hex_is_an_error_not_a_panic() {
        assert!(parse_hex("abc").unwrap_err().contains("odd number"));
        assert!(parse_hex("zz").unwrap_err().contains("'z'"));
        assert!(parse_hex("0g").unwrap_err().contains("position 2"));
        assert!(parse_hex("é1").is_err());
        assert!(parse_hex("0x").unwrap().is_empty());
    }

    #[test]
    fn encoding_decodes_and_encodes() {
        assert_eq!(Encoding::Text.decode("KEY", "0xff").unwrap(), b"0xff");
        assert_eq!(Encoding::Hex.decode("KEY", "0xff").unwrap(), b"\xff");
        let err = Encoding::Hex.decode("KEY", "xyz").unwrap_err();
        assert!(err.starts_with("KEY is not valid hex"), "{err}");
        assert_eq!(Encoding::Text.encode(b"k\xff"), "k\\xff");
        assert_eq!(Encoding::Hex.encode(b"k\xff"), "6bff");
        assert_eq!(Encoding::Text.quote(b"k"), "\"k\"");
        assert_eq!(Encoding::Hex.quote(b"k"), "0x6b");
        assert_eq!(Encoding::new(true), Encoding::Hex);
        assert_eq!(Encoding::new(false), Encoding::Text);
    }
}
