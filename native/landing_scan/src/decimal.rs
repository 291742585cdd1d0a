//! A record's value as `DECIMAL(38, 9)`, read from its JSON text where the text says exactly
//! which decimal it is.
//!
//! The fast parser turned each part's value texts into decimals with Arrow's kernels (a
//! pattern match over every text, then a cast): about a fifth of a part's parse on the
//! benchmark's lines. The scanner reads the usual value here instead, as it writes the line's
//! other columns. It takes only the texts Arrow's cast reads exactly (the pattern
//! `-?(0|[1-9][0-9]{0,28})(\.[0-9]{1,9})?`, jobs/streams/landing/fast_parse.py); every other
//! text is left to the Python side, which reads it as before.

/// No value, or `null`.
pub const ABSENT: u8 = 0;
/// A number `DECIMAL(38, 9)` holds as written: its unscaled integer is given.
pub const HELD: u8 = 1;
/// Any other text: the Python side reads it.
pub const OTHER: u8 = 2;

/// Digits a held number may have before its point (38 in all, 9 after it).
const WHOLE_DIGITS: usize = 29;
const SCALE: u32 = 9;

/// The value's kind, and its unscaled integer (the number times 10^9) when held.
pub fn read_value(text: Option<&str>) -> (u8, i128) {
    match text {
        None | Some("null") => (ABSENT, 0),
        Some(text) => match unscaled(text.as_bytes()) {
            Some(units) => (HELD, units),
            None => (OTHER, 0),
        },
    }
}

fn unscaled(text: &[u8]) -> Option<i128> {
    let (negative, rest) = match text.first()? {
        b'-' => (true, &text[1..]),
        _ => (false, text),
    };
    let (whole, fraction) = match rest.iter().position(|b| *b == b'.') {
        Some(point) => (&rest[..point], Some(&rest[point + 1..])),
        None => (rest, None),
    };
    let digits = |part: &[u8]| part.iter().all(u8::is_ascii_digit);
    if whole.is_empty()
        || whole.len() > WHOLE_DIGITS
        || !digits(whole)
        || (whole.len() > 1 && whole[0] == b'0')
    {
        return None;
    }
    let fraction = fraction.unwrap_or(b"");
    if (rest.len() > whole.len() && fraction.is_empty())
        || fraction.len() > SCALE as usize
        || !digits(fraction)
    {
        return None;
    }
    let mut units: i128 = 0;
    for digit in whole.iter().chain(fraction) {
        units = units * 10 + i128::from(digit - b'0');
    }
    units *= 10i128.pow(SCALE - fraction.len() as u32);
    Some(if negative { -units } else { units })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_texts_arrow_reads_exactly_are_held() {
        assert_eq!(read_value(Some("12.5")), (HELD, 12_500_000_000));
        assert_eq!(read_value(Some("-0.000000001")), (HELD, -1));
        assert_eq!(read_value(Some("-0")), (HELD, 0));
        assert_eq!(read_value(Some("0")), (HELD, 0));
        let most = "9".repeat(29) + "." + &"9".repeat(9);
        assert_eq!(read_value(Some(&most)), (HELD, 10i128.pow(38) - 1));
    }

    #[test]
    fn every_other_text_is_left_to_python() {
        for text in [
            "1.",
            ".5",
            "01",
            "1e3",
            "1.0000000001",
            "\"5\"",
            "true",
            "-",
            "",
            "1.2.3",
            "+1",
            "- 1",
            "NaN",
        ] {
            assert_eq!(read_value(Some(text)).0, OTHER, "{text}");
        }
        let too_long = "1".repeat(30);
        assert_eq!(read_value(Some(&too_long)).0, OTHER);
        assert_eq!(read_value(None), (ABSENT, 0));
        assert_eq!(read_value(Some("null")), (ABSENT, 0));
    }
}
