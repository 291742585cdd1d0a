//! The usual landing line read without serde: a flat JSON object of ASCII names and values
//! written without escapes, as collectors write them.
//!
//! serde_json's path took about half of the scanner's 300 ns a line on the benchmark's lines,
//! most of it in its generic string and map machinery. A flat object is read here in one
//! pass. This reader takes a strict subset of what serde_json's path takes and gives the same
//! fields for it: wherever it is unsure (an escape, a control character, a byte that is not
//! ASCII, a nested value, a name given twice, a number of another shape, text after the
//! object), it returns `None` and the line goes to serde_json's path, which decides as
//! before.

use crate::{Scanned, Time, MAX_EXTRAS};

/// Where a JSON value of the line ends, and what it is.
enum Token {
    /// A string without escapes: its characters, between the quotes.
    Str(usize, usize),
    /// An integer within `i64` (no fraction, no exponent).
    Int(i64),
    /// Any other number, `true`, `false` or `null`.
    Other,
}

struct Reader<'a> {
    line: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.line.get(self.at).copied()
    }

    /// JSON's whitespace (a line holds no newline).
    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// A string's characters, when it holds neither an escape, a control character nor a
    /// byte beyond ASCII.
    fn string(&mut self) -> Option<(usize, usize)> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            match self.peek()? {
                b'"' => break,
                b'\\' | 0..=0x1f | 0x80..=0xff => return None,
                _ => self.at += 1,
            }
        }
        let end = self.at;
        self.at += 1;
        Some((start, end))
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }

    /// A number in JSON's grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Option<Token> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let first = self.at;
        let whole = self.digits();
        if whole == 0 || (whole > 1 && self.line[first] == b'0') {
            return None;
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return None;
            }
            integer = false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return None;
            }
            integer = false;
        }
        // "-0" is serde_json's float, not an integer; an integer beyond 64 bits is its
        // float too
        if !integer || whole > 19 || (negative && self.line[first] == b'0') {
            return Some(Token::Other);
        }
        let mut units: i64 = 0;
        for digit in &self.line[first..self.at] {
            units = match units
                .checked_mul(10)
                .and_then(|u| u.checked_add(i64::from(digit - b'0')))
            {
                Some(units) => units,
                // beyond i64 (a negative one's least is beyond every event time's bound too)
                None => return Some(Token::Other),
            };
        }
        Some(Token::Int(if negative { -units } else { units }))
    }

    fn literal(&mut self, word: &[u8]) -> Option<Token> {
        let end = self.at + word.len();
        (self.line.get(self.at..end)? == word).then(|| {
            self.at = end;
            Token::Other
        })
    }

    /// A value that is not an object or an array, with where its text starts.
    fn value(&mut self) -> Option<(usize, Token)> {
        let start = self.at;
        let token = match self.peek()? {
            b'"' => {
                let (from, to) = self.string()?;
                Token::Str(from, to)
            }
            b'-' | b'0'..=b'9' => self.number()?,
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            _ => return None,
        };
        Some((start, token))
    }

    fn text(&self, from: usize, to: usize) -> &'a str {
        // SAFETY: the reader takes only ASCII bytes into a value or a name (strings refuse
        // any other; numbers and literals are made of ASCII), so these are valid UTF-8
        unsafe { std::str::from_utf8_unchecked(&self.line[from..to]) }
    }
}

/// The line's fields as serde_json's path reads them, when the line is a flat object this
/// reader is sure of; `None` leaves the line to that path.
pub fn scan_flat<'a>(line: &'a [u8], extras: &[&[u8]]) -> Option<Scanned<'a>> {
    let mut reader = Reader { line, at: 0 };
    reader.skip_space();
    reader.expect(b'{')?;
    let mut key: Option<&'a str> = None;
    let mut time: Option<Time<'a>> = None;
    let mut value: Option<&'a str> = None;
    if extras.len() > MAX_EXTRAS {
        return None;
    }
    let mut extra_values: [Option<&'a str>; MAX_EXTRAS] = [None; MAX_EXTRAS];
    reader.skip_space();
    if reader.peek()? != b'}' {
        loop {
            reader.skip_space();
            let (from, to) = reader.string()?;
            let name = &line[from..to];
            reader.skip_space();
            reader.expect(b':')?;
            reader.skip_space();
            let (start, token) = reader.value()?;
            let raw = reader.text(start, reader.at);
            match name {
                b"key" => match token {
                    Token::Str(a, b) if key.is_none() => key = Some(reader.text(a, b)),
                    _ => return None,
                },
                b"event_time" => {
                    if time.is_some() {
                        return None;
                    }
                    time = Some(match token {
                        Token::Int(ms) => Time::millis(i128::from(ms))?,
                        Token::Str(a, b) => Time::Text(reader.text(a, b)),
                        _ => return None,
                    });
                }
                b"value" => {
                    if value.is_some() {
                        return None;
                    }
                    value = Some(raw);
                }
                _ => {
                    if let Some(i) = extras.iter().position(|e| *e == name) {
                        if extra_values[i].is_some() {
                            return None;
                        }
                        extra_values[i] = Some(raw);
                    }
                }
            }
            reader.skip_space();
            match reader.peek()? {
                b',' => reader.at += 1,
                b'}' => break,
                _ => return None,
            }
        }
    }
    reader.expect(b'}')?;
    reader.skip_space();
    if reader.at != line.len() {
        return None;
    }
    Some(Scanned {
        key: key?,
        time: time?,
        value,
        extras: extra_values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{scan_with_serde, Time};

    fn fields(scanned: &Scanned) -> (String, String, Option<String>, Vec<Option<String>>) {
        let time = match scanned.time {
            Time::Millis(ms) => format!("ms {ms}"),
            Time::Text(text) => format!("text {text}"),
        };
        (
            scanned.key.to_string(),
            time,
            scanned.value.map(str::to_string),
            scanned
                .extras
                .iter()
                .map(|e| e.map(str::to_string))
                .collect(),
        )
    }

    const EXTRAS: &[&[u8]] = &[b"received_at"];

    #[test]
    fn a_flat_line_reads_as_serde_reads_it() {
        for line in [
            r#"{"key":"user-000001","event_time":1795730000000,"value":12.5,"received_at":1795730001000}"#,
            r#"{ "key" : "k" , "event_time" : -5 , "value" : null , "x" : [1] }"#,
            "{\"key\":\"k\",\"event_time\":\"2026-01-01T00:00:00Z\",\"value\":\"5\"}\t\r ",
            r#"{"event_time":4611686018427387903,"key":"k","value":-1.5e-3,"other":true}"#,
            r#"{"key":"k","event_time":1,"value":false,"received_at":"s","o":1E+400}"#,
            r#"{"key":"k","event_time":0,"value":123456789012345678901234567890}"#,
        ] {
            let flat = scan_flat(line.as_bytes(), EXTRAS);
            let serde = scan_with_serde(line.as_bytes(), EXTRAS);
            if line.contains("[1]") {
                assert!(flat.is_none(), "{line}"); // nested: serde's way
                continue;
            }
            assert_eq!(
                fields(&flat.expect(line)),
                fields(&serde.expect(line)),
                "{line}"
            );
        }
    }

    #[test]
    fn where_unsure_the_line_is_left_to_serde() {
        for line in [
            r#"{"key":"k\u0065","event_time":1}"#, // an escape
            r#"{"key":"k","event_time":01}"#,      // not JSON
            r#"{"key":"k","event_time":-0}"#,      // serde's float
            r#"{"key":"k","event_time":1.0}"#,
            r#"{"key":"k","event_time":4611686018427387904}"#, // out of range
            r#"{"key":"k","event_time":12345678901234567890}"#,
            r#"{"key":"k","event_time":1,"value":1,"value":2}"#, // twice
            r#"{"key":"k","event_time":1,"received_at":1,"received_at":2}"#,
            r#"{"key":"k","event_time":1,}"#,
            r#"{"key":"k","event_time":1} x"#,
            r#"{"key":"k","event_time":1,"value":NaN}"#,
            r#"{"key":"k","event_time":1,"value":1.}"#,
            r#"{"key":"k","event_time":1,"value":tru}"#,
            "{\"key\":\"k\",\"event_time\":1,\"x\":\"a\u{1}b\"}",
            "{\"key\":\"k\",\"event_time\":1}\u{c}",
            r#"{"key":5,"event_time":1}"#,
            r#"{"event_time":1}"#,
            r#"{}"#,
        ] {
            assert!(scan_flat(line.as_bytes(), EXTRAS).is_none(), "{line}");
        }
    }
}
