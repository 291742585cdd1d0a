//! Landing lines scanned into columns, for the fast parser's usual lines only.
//!
//! A line is *scanned* when it is a JSON object (by serde_json, which takes no text Python's
//! json module refuses on lines this short and this shallow) whose key is a string without
//! escapes and whose event time is an integer within range or a text without escapes; its
//! key, event time, the value's JSON text and the extra fields' JSON texts are written to
//! columns; the value, where it is a number `DECIMAL(38, 9)` holds as written, as that
//! decimal (decimal.rs). The usual line, a flat object without escapes, is read by a reader
//! of its own (flat.rs); serde_json reads any other. Every other line is left for
//! Python's `parse_line`, which says what it is: this scanner never decides a rejection, so
//! where it is unsure it only costs time (jobs/streams/landing/native_scan.py says which
//! lines the Python side checks further).

mod decimal;
mod flat;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// The line is a record with an integer event time.
pub const INT_TIME: u8 = 0;
/// The line is a record whose event time is a text (Python reads it).
pub const TEXT_TIME: u8 = 1;
/// The line goes to `parse_line`.
pub const SLOW: u8 = 2;

const EVENT_TIME_BOUND: i128 = 1 << 62;
/// What `landing_scan` takes and writes; the Python side uses a library of this version only
/// (an older build is not called with arguments it does not know).
pub const ABI_VERSION: u32 = 2;
/// Lines with more opening brackets than this are not scanned: serde_json skips the values
/// it does not build (other fields, and the texts it keeps) at any depth, where Python's json
/// module stops at its recursion limit (about 1,000 levels, less on a deeper stack).
pub const MAX_BRACKETS: usize = 128;
/// The most extra fields a scan reads (ingest reads two at most: its clock's and a
/// punctuation's); with more, `landing_scan` writes nothing and returns 2.
pub const MAX_EXTRAS: usize = 4;

enum Field {
    Key,
    Time,
    Value,
    Extra(usize),
    Other,
}

struct FieldSeed<'a> {
    extras: &'a [&'a [u8]],
}

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Field;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Field, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<'_> {
    type Value = Field;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, name: &str) -> Result<Field, E> {
        // escaped names arrive unescaped: "k\u0065y" is the key, as in Python
        Ok(match name {
            "key" => Field::Key,
            "event_time" => Field::Time,
            "value" => Field::Value,
            _ => match self.extras.iter().position(|e| *e == name.as_bytes()) {
                Some(i) => Field::Extra(i),
                None => Field::Other,
            },
        })
    }
}

/// A string read as it stands in the line (no escapes), else an error: the line goes slow.
struct PlainStr;

impl<'de> Visitor<'de> for PlainStr {
    type Value = &'de str;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string without escapes")
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<&'de str, E> {
        Ok(s)
    }
}

impl<'de> DeserializeSeed<'de> for PlainStr {
    type Value = &'de str;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'de str, D::Error> {
        d.deserialize_str(self)
    }
}

pub(crate) enum Time<'de> {
    Millis(i64),
    Text(&'de str),
}

impl Time<'_> {
    /// An integer event time, when it is within range (both readers take it so).
    pub(crate) fn millis(v: i128) -> Option<Self> {
        (-EVENT_TIME_BOUND < v && v < EVENT_TIME_BOUND).then_some(Time::Millis(v as i64))
    }
}

struct TimeSeed;

impl<'de> Visitor<'de> for TimeSeed {
    type Value = Time<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer event time within range, or a text")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Time<'de>, E> {
        self.visit_i128(v as i128)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Time<'de>, E> {
        self.visit_i128(v as i128)
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Time<'de>, E> {
        Time::millis(v).ok_or_else(|| E::custom("out of range"))
    }
    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Time<'de>, E> {
        Ok(Time::Text(s))
    }
}

impl<'de> DeserializeSeed<'de> for TimeSeed {
    type Value = Time<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Time<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

pub(crate) struct Scanned<'de> {
    pub(crate) key: &'de str,
    pub(crate) time: Time<'de>,
    pub(crate) value: Option<&'de str>,
    /// The extra fields' texts, the first `extras.len()` of them.
    pub(crate) extras: [Option<&'de str>; MAX_EXTRAS],
}

struct RecordSeed<'a> {
    extras: &'a [&'a [u8]],
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Scanned<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scanned<'de>, A::Error> {
        let mut key = None;
        let mut time = None;
        let mut value: Option<&'de str> = None;
        let mut seen_value = false;
        let mut extras: [Option<&'de str>; MAX_EXTRAS] = [None; MAX_EXTRAS];
        while let Some(field) = map.next_key_seed(FieldSeed {
            extras: self.extras,
        })? {
            // a name given twice: Python keeps the last, its way decides
            match field {
                Field::Key => {
                    if key.is_some() {
                        return Err(de::Error::custom("key twice"));
                    }
                    key = Some(map.next_value_seed(PlainStr)?);
                }
                Field::Time => {
                    if time.is_some() {
                        return Err(de::Error::custom("event_time twice"));
                    }
                    time = Some(map.next_value_seed(TimeSeed)?);
                }
                Field::Value => {
                    if seen_value {
                        return Err(de::Error::custom("value twice"));
                    }
                    seen_value = true;
                    value = Some(map.next_value::<&'de RawValue>()?.get());
                }
                Field::Extra(i) => {
                    if extras[i].is_some() {
                        return Err(de::Error::custom("extra twice"));
                    }
                    extras[i] = Some(map.next_value::<&'de RawValue>()?.get());
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        match (key, time) {
            (Some(key), Some(time)) => Ok(Scanned {
                key,
                time,
                value,
                extras,
            }),
            _ => Err(de::Error::custom("no key or no event time")),
        }
    }
}

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Scanned<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Scanned<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

/// The line's fields, when it is a record the scanner can vouch for: a key of ASCII
/// characters (so that "blank" means spaces only and its length is its characters'), not
/// blank, within `max_key_chars`.
fn scan_line<'de>(line: &'de [u8], extras: &[&[u8]], max_key_chars: usize) -> Option<Scanned<'de>> {
    let scanned = match flat::scan_flat(line, extras) {
        Some(scanned) => scanned,
        None => scan_with_serde(line, extras)?,
    };
    let key = scanned.key;
    if !key.is_ascii() || key.len() > max_key_chars || key.bytes().all(|b| b == b' ') {
        return None;
    }
    Some(scanned)
}

/// Any line serde_json reads as a record object: the flat reader's way when it is unsure.
fn scan_with_serde<'de>(line: &'de [u8], extras: &[&[u8]]) -> Option<Scanned<'de>> {
    if line.iter().filter(|b| **b == b'[' || **b == b'{').count() > MAX_BRACKETS {
        return None;
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    let scanned = RecordSeed { extras }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(scanned)
}

/// A column of texts: bytes one after another, each text's end in `ends`.
struct Column {
    bytes: *mut u8,
    ends: *mut i64,
    at: usize,
}

impl Column {
    unsafe fn push(&mut self, index: usize, text: &[u8]) {
        std::ptr::copy_nonoverlapping(text.as_ptr(), self.bytes.add(self.at), text.len());
        self.at += text.len();
        *self.ends.add(index) = self.at as i64;
    }
}

/// A column of JSON values as one JSON array: `[a,b,null,...]`, `null` where absent.
struct ArrayColumn {
    bytes: *mut u8,
    at: usize,
}

impl ArrayColumn {
    unsafe fn put(&mut self, text: &[u8]) {
        std::ptr::copy_nonoverlapping(text.as_ptr(), self.bytes.add(self.at), text.len());
        self.at += text.len();
    }
}

/// Scans `count` lines of `data` (line `i` from `starts[i]` to the byte before
/// `starts[i + 1]`, its newline). Lines longer than `max_fast_bytes`, and keys longer than
/// `max_key_chars`, go slow. For each line: `status[i]`, `times[i]` (integer times), and the
/// key and the text time appended to their columns (empty where absent or slow); the value's
/// kind in `value_status[i]` (`decimal::ABSENT`, `HELD` or `OTHER`), its unscaled
/// `DECIMAL(38, 9)` integer in `value_units` (16 bytes a line, little-endian) where held, and
/// its JSON text in the value column where it is another (empty elsewhere); each extra
/// field's JSON texts as one JSON array per field. `extra_names`
/// are the `extra_count` extra fields' names, each followed by a newline (none holds one).
/// Returns the bytes written to each extra array in `extra_lens`; 0 on success, 1 after a
/// panic, 2 when the names are not `extra_count` or more than [`MAX_EXTRAS`] (nothing
/// written is to be used).
///
/// # Safety
///
/// `data` holds `data_len` bytes and `starts` `count + 1` ascending offsets into it, the
/// last `data_len`, each line ending with a newline; `extra_names` holds `extra_names_len`
/// bytes. Output buffers: `status`, `times`, `value_status` and the three `*_ends` hold
/// `count` items, `value_units` `16 * count` bytes, the
/// three text columns `data_len` bytes, `extra_arrays` `extra_count` pointers to arrays of
/// `data_len + 5 * count + 2` bytes, `extra_lens` `extra_count` items
/// (jobs/streams/landing/native_scan.py allocates them so).
#[no_mangle]
pub unsafe extern "C" fn landing_scan(
    data: *const u8,
    data_len: usize,
    starts: *const i64,
    count: usize,
    max_fast_bytes: usize,
    max_key_chars: usize,
    extra_names: *const u8,
    extra_names_len: usize,
    extra_count: usize,
    status: *mut u8,
    times: *mut i64,
    key_bytes: *mut u8,
    key_ends: *mut i64,
    time_bytes: *mut u8,
    time_ends: *mut i64,
    value_bytes: *mut u8,
    value_ends: *mut i64,
    value_status: *mut u8,
    value_units: *mut u8,
    extra_arrays: *const *mut u8,
    extra_lens: *mut i64,
) -> i32 {
    let outcome = std::panic::catch_unwind(|| {
        let data = std::slice::from_raw_parts(data, data_len);
        let starts = std::slice::from_raw_parts(starts, count + 1);
        let names_blob = std::slice::from_raw_parts(extra_names, extra_names_len);
        let names: Vec<&[u8]> = names_blob
            .split(|b| *b == b'\n')
            .filter(|n| !n.is_empty())
            .collect();
        if names.len() != extra_count || extra_count > MAX_EXTRAS {
            return 2;
        }
        let mut keys = Column {
            bytes: key_bytes,
            ends: key_ends,
            at: 0,
        };
        let mut texts = Column {
            bytes: time_bytes,
            ends: time_ends,
            at: 0,
        };
        let mut values = Column {
            bytes: value_bytes,
            ends: value_ends,
            at: 0,
        };
        let mut arrays: Vec<ArrayColumn> = (0..names.len())
            .map(|j| ArrayColumn {
                bytes: *extra_arrays.add(j),
                at: 0,
            })
            .collect();
        for array in arrays.iter_mut() {
            array.put(b"[");
        }
        for i in 0..count {
            let line = &data[starts[i] as usize..(starts[i + 1] as usize) - 1];
            let scanned = if line.len() <= max_fast_bytes {
                scan_line(line, &names, max_key_chars)
            } else {
                None
            };
            let mut kind = SLOW;
            let mut millis = 0i64;
            match &scanned {
                Some(record) => {
                    keys.push(i, record.key.as_bytes());
                    match record.time {
                        Time::Millis(ms) => {
                            kind = INT_TIME;
                            millis = ms;
                            texts.push(i, b"");
                        }
                        Time::Text(text) => {
                            kind = TEXT_TIME;
                            texts.push(i, text.as_bytes());
                        }
                    }
                    let (kind, units) = decimal::read_value(record.value);
                    *value_status.add(i) = kind;
                    std::ptr::write_unaligned((value_units as *mut i128).add(i), units.to_le());
                    let other = if kind == decimal::OTHER {
                        record.value
                    } else {
                        None
                    };
                    values.push(i, other.unwrap_or("").as_bytes());
                }
                None => {
                    keys.push(i, b"");
                    texts.push(i, b"");
                    values.push(i, b"");
                    *value_status.add(i) = decimal::ABSENT;
                    std::ptr::write_unaligned((value_units as *mut i128).add(i), 0);
                }
            }
            *status.add(i) = kind;
            *times.add(i) = millis;
            for (j, array) in arrays.iter_mut().enumerate() {
                if i > 0 {
                    array.put(b",");
                }
                let text = scanned.as_ref().and_then(|r| r.extras[j]).unwrap_or("null");
                array.put(text.as_bytes());
            }
        }
        for (j, array) in arrays.iter_mut().enumerate() {
            array.put(b"]");
            *extra_lens.add(j) = array.at as i64;
        }
        0
    });
    outcome.unwrap_or(1)
}

/// The version of `landing_scan`'s arguments this library takes ([`ABI_VERSION`]).
#[no_mangle]
pub extern "C" fn landing_scan_abi() -> u32 {
    ABI_VERSION
}
