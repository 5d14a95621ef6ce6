//! JSON string escapes that are valid JSON text but not valid Unicode: lone UTF-16
//! surrogate halves.
//!
//! A model server that splits a character outside the Basic Multilingual Plane
//! between two stream chunks may send its halves as separate escapes: one chunk's
//! string ends in `\ud83d`, the next one's starts with `\ude42` (together U+1F642).
//! Each data line is valid JSON, but neither string is valid Unicode on its own, so a
//! strict decoder fails the whole response.
//!
//! [`mark_lone_surrogates`] rewrites every lone half in a data line into a marker that
//! survives JSON parsing (U+FDD0, a noncharacter reserved for internal use, then the
//! half's four hex digits). A [`SurrogateJoiner`] per streamed field (a text block, a
//! tool call's arguments) then pairs a high half at the end of one delta with a low
//! half at the start of the next, and turns every half that stays alone into U+FFFD.
//! [`repair_lone_surrogates`] does the last step for JSON text that is parsed whole
//! (a tool call's joined arguments).

use std::borrow::Cow;

/// Starts a marker for one lone surrogate half (followed by its four hex digits).
const MARKER: char = '\u{FDD0}';
/// The marker's length in bytes: U+FDD0 (3 bytes in UTF-8) and four ASCII hex digits.
const MARKER_BYTES: usize = 3 + 4;

/// `json` with each `\uXXXX` escape of a lone surrogate half rewritten by `replace`
/// (which gets the half); borrowed when there is none.
fn rewrite_lone_escapes(json: &str, replace: impl Fn(u16) -> String) -> Cow<'_, str> {
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = escaped_unit(bytes, i) else {
            // Another escape (`\\`, `\"`, `\n`, …): skip both bytes.
            i += 2;
            continue;
        };
        if (0xD800..0xDC00).contains(&unit) {
            if escaped_unit(bytes, i + 6).is_some_and(|low| (0xDC00..0xE000).contains(&low)) {
                i += 12;
                continue;
            }
        } else if !(0xDC00..0xE000).contains(&unit) {
            i += 6;
            continue;
        }
        let text = out.get_or_insert_with(|| String::with_capacity(json.len()));
        text.push_str(&json[copied..i]);
        text.push_str(&replace(unit));
        i += 6;
        copied = i;
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut text) => {
            text.push_str(&json[copied..]);
            Cow::Owned(text)
        }
    }
}

/// The code unit of the `\uXXXX` escape at `at`, if there is one.
fn escaped_unit(bytes: &[u8], at: usize) -> Option<u16> {
    let escape = bytes.get(at..at + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

/// A data line (JSON text) with every lone surrogate half marked for a
/// [`SurrogateJoiner`]; borrowed when there is none.
pub(crate) fn mark_lone_surrogates(json: &str) -> Cow<'_, str> {
    rewrite_lone_escapes(json, |unit| {
        format!("\\u{:04x}{unit:04x}", u32::from(MARKER))
    })
}

/// JSON text with every lone surrogate half replaced by U+FFFD; borrowed when there is
/// none.
pub(crate) fn repair_lone_surrogates(json: &str) -> Cow<'_, str> {
    rewrite_lone_escapes(json, |_| "\\ufffd".to_owned())
}

/// The half a marker at the start of `text` stands for.
fn marker_at(text: &str) -> Option<u16> {
    let rest = text.strip_prefix(MARKER)?;
    let hex = rest.get(..4)?;
    u16::from_str_radix(hex, 16)
        .ok()
        .filter(|unit| (0xD800..0xE000).contains(unit))
}

/// `text` (one delta, or a whole field's deltas joined) with adjacent high and low
/// markers joined into their character and every other marker replaced by U+FFFD.
pub(crate) fn resolve_markers(text: &str) -> Cow<'_, str> {
    if !text.contains(MARKER) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARKER) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(unit) = marker_at(rest) else {
            out.push(MARKER);
            rest = &rest[MARKER.len_utf8()..];
            continue;
        };
        rest = &rest[MARKER_BYTES..];
        let low = marker_at(rest).filter(|low| (0xDC00..0xE000).contains(low));
        match low {
            Some(low) if (0xD800..0xDC00).contains(&unit) => {
                let pair = char::decode_utf16([unit, low])
                    .next()
                    .and_then(Result::ok)
                    .unwrap_or(char::REPLACEMENT_CHARACTER);
                out.push(pair);
                rest = &rest[MARKER_BYTES..];
            }
            _ => out.push(char::REPLACEMENT_CHARACTER),
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Joins the deltas of one streamed string field (marked by [`mark_lone_surrogates`]):
/// a high half that ends one delta waits for the next, which may start with its low
/// half. See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct SurrogateJoiner {
    /// A high-half marker that ended the last delta.
    pending: String,
}

impl SurrogateJoiner {
    /// The text of the next delta, ready to show: markers resolved, a trailing high
    /// half held back.
    pub(crate) fn push(&mut self, delta: &str) -> String {
        let mut text = std::mem::take(&mut self.pending);
        text.push_str(delta);
        if let Some(at) = text.len().checked_sub(MARKER_BYTES) {
            let trailing_high = text
                .get(at..)
                .and_then(marker_at)
                .is_some_and(|unit| (0xD800..0xDC00).contains(&unit));
            if trailing_high {
                self.pending = text.split_off(at);
            }
        }
        resolve_markers(&text).into_owned()
    }

    /// What is still held back (U+FFFD for a high half that never got its low half),
    /// at the end of the field.
    pub(crate) fn finish(&mut self) -> String {
        resolve_markers(&std::mem::take(&mut self.pending)).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(json: &str) -> String {
        let marked = mark_lone_surrogates(json);
        serde_json::from_str(&marked).unwrap()
    }

    #[test]
    fn halves_in_consecutive_deltas_pair() {
        let mut joiner = SurrogateJoiner::default();
        let first = joiner.push(&field(r#""smile \ud83d""#));
        let second = joiner.push(&field(r#""\ude42 end""#));
        assert_eq!(first, "smile ");
        assert_eq!(
            format!("{first}{second}{}", joiner.finish()),
            "smile 🙂 end"
        );
    }

    #[test]
    fn lone_halves_become_replacement_characters() {
        let mut joiner = SurrogateJoiner::default();
        let a = joiner.push(&field(r#""a\ude42b\ud83dc""#));
        let b = joiner.push(&field(r#""d\ud83d""#));
        let c = joiner.push(&field(r#""e""#));
        let d = joiner.push(&field(r#""\ud83d""#));
        let rest = joiner.finish();
        assert_eq!(
            format!("{a}{b}{c}{d}{rest}"),
            "a\u{FFFD}b\u{FFFD}cd\u{FFFD}e\u{FFFD}"
        );
    }

    #[test]
    fn valid_pairs_and_escaped_backslashes_are_left_alone() {
        let json = r#""\ud83d\ude42 \\ud83d \u00e9""#;
        assert!(matches!(mark_lone_surrogates(json), Cow::Borrowed(_)));
        assert_eq!(field(json), "🙂 \\ud83d é");
    }

    #[test]
    fn repair_replaces_lone_halves_in_nested_json() {
        let json = r#"{"a": "x\ud83d", "b": "\ud83d\ude42"}"#;
        let value: serde_json::Value = serde_json::from_str(&repair_lone_surrogates(json)).unwrap();
        assert_eq!(value["a"], "x\u{FFFD}");
        assert_eq!(value["b"], "🙂");
    }
}
