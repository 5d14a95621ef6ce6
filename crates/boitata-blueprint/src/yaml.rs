//! The YAML of a blueprint as a tree of values that remember where they were written.
//!
//! [`read`] parses text with `serde-saphyr` (bounded: input size, nesting, nodes,
//! aliases and alias replay are capped, so an alias bomb is an error, not gigabytes)
//! into a [`Yaml`] tree; duplicate mapping keys are kept aside, with both places, for
//! validation to report. A `&Yaml` is itself a serde [`Deserializer`], so the model's
//! derived `Deserialize` impls read typed values out of the tree, and their errors
//! carry the span and the field path of the value at fault.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};
use serde::Deserialize;
use serde_saphyr::options::{AliasLimits, DuplicateKeyPolicy};
use serde_saphyr::{Budget, Options, Spanned};

/// The largest blueprint file read, in bytes.
pub const MAX_BLUEPRINT_BYTES: usize = 1024 * 1024;

/// A byte range of the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Span {
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

impl Span {
    fn from_location(location: serde_saphyr::Location) -> Option<Span> {
        if location.line() == 0 {
            return None;
        }
        let span = location.span();
        let offset = usize::try_from(span.byte_offset()?).ok()?;
        let len = usize::try_from(span.byte_len().unwrap_or(0)).ok()?;
        Some(Span { offset, len })
    }
}

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Yaml {
    pub(crate) value: Value,
    pub(crate) span: Option<Span>,
    /// For a plain scalar read as a number or a boolean: the text as written (`3.10`,
    /// `007`, `0x1F`), which a number would not give back.
    pub(crate) source: Option<Box<str>>,
}

/// The name [`scalar_text`] asks a `&Yaml` for: a number comes back as the text it was
/// written as, not as the number (`3.10` stays `3.10`, not `3.1`).
pub(crate) const SCALAR_TEXT: &str = "boitata::ScalarText";

/// The text a scalar was written as, when a field takes any scalar as text (param
/// defaults, `env` values): through `&Yaml`, a number as written ([`Yaml::source`]);
/// through another deserializer, what [`Deserializer::deserialize_any`] gives `visitor`.
pub(crate) fn scalar_text<'de, D, V>(d: D, visitor: V) -> Result<V::Value, D::Error>
where
    D: Deserializer<'de>,
    V: Visitor<'de>,
{
    d.deserialize_newtype_struct(SCALAR_TEXT, visitor)
}

/// A YAML value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Yaml>),
    Map(Mapping),
}

/// A mapping, in file order, with its duplicate keys set aside.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Mapping {
    pub(crate) entries: Vec<(Key, Yaml)>,
    /// `(first, repeated)` for each key written twice; the first entry is kept.
    pub(crate) duplicates: Vec<(Key, Key)>,
}

impl Mapping {
    pub(crate) fn get(&self, key: &str) -> Option<&Yaml> {
        self.entries
            .iter()
            .find(|(k, _)| k.text == key)
            .map(|(_, v)| v)
    }

    pub(crate) fn key(&self, key: &str) -> Option<&Key> {
        self.entries
            .iter()
            .find(|(k, _)| k.text == key)
            .map(|(k, _)| k)
    }
}

/// A mapping key (a scalar, read as text) and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    pub(crate) text: String,
    pub(crate) span: Option<Span>,
}

impl Yaml {
    /// A value written at `span` (not from a parsed file: no source text).
    pub(crate) fn new(value: Value, span: Option<Span>) -> Self {
        Yaml {
            value,
            span,
            source: None,
        }
    }

    /// Records, for each plain number and boolean in the tree, its text in `text`
    /// (the file the tree was read from).
    fn keep_source(&mut self, text: &str) {
        match &mut self.value {
            Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                let written = self
                    .span
                    .and_then(|span| text.get(span.offset..span.offset + span.len));
                // An alias (`*a`) names another node; an anchor or a tag (`&a 3.10`,
                // `!!float 1`) comes before the scalar itself.
                self.source = written
                    .filter(|w| !w.starts_with('*'))
                    .and_then(|w| w.split_whitespace().last())
                    .filter(|w| !w.is_empty() && !w.starts_with(['&', '!']))
                    .map(Box::from);
            }
            Value::Seq(items) => items.iter_mut().for_each(|item| item.keep_source(text)),
            Value::Map(map) => map
                .entries
                .iter_mut()
                .for_each(|(_, value)| value.keep_source(text)),
            Value::Null | Value::Str(_) => {}
        }
    }

    /// A short name of the value's kind, for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self.value {
            Value::Null => "nothing (null)",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }

    pub(crate) fn as_map(&self) -> Option<&Mapping> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A YAML error from the parser, with where it was found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SyntaxError {
    pub(crate) message: String,
    pub(crate) span: Option<Span>,
}

fn options() -> Options {
    let mut budget = Budget::default();
    budget.max_reader_input_bytes = Some(MAX_BLUEPRINT_BYTES);
    budget.max_events = 200_000;
    budget.max_aliases = 1_000;
    budget.max_anchors = 1_000;
    budget.max_nodes = 100_000;
    budget.max_depth = 32;
    budget.max_documents = 1;
    budget.max_total_scalar_bytes = 4 * MAX_BLUEPRINT_BYTES;
    budget.max_merge_keys = 1_000;
    budget.max_recorded_anchor_events = 100_000;
    budget.max_recorded_anchor_bytes = 4 * MAX_BLUEPRINT_BYTES;
    let mut aliases = AliasLimits::default();
    aliases.max_total_replayed_events = 100_000;
    aliases.max_replay_stack_depth = 16;
    aliases.max_alias_expansions_per_anchor = 1_000;
    let mut options = Options::default();
    options.budget = Some(budget);
    options.alias_limits = aliases;
    // Duplicates reach our visitor, which keeps the first and reports both places.
    options.duplicate_keys = DuplicateKeyPolicy::PassThrough;
    // YAML 1.2 booleans only: `yes`, `on` and `n` stay strings.
    options.strict_booleans = true;
    options
}

/// Parses `text` into a tree.
///
/// # Errors
/// A [`SyntaxError`]: bad YAML, input over [`MAX_BLUEPRINT_BYTES`], a breached budget
/// (alias bombs, deep nesting), several documents.
pub(crate) fn read(text: &str) -> Result<Yaml, SyntaxError> {
    if text.len() > MAX_BLUEPRINT_BYTES {
        return Err(SyntaxError {
            message: format!(
                "the file is {} bytes; blueprints are limited to {MAX_BLUEPRINT_BYTES} bytes",
                text.len()
            ),
            span: Some(Span { offset: 0, len: 0 }),
        });
    }
    let mut yaml =
        serde_saphyr::from_str_with_options::<Yaml>(text, options()).map_err(|e| SyntaxError {
            message: syntax_message(&e),
            span: e
                .location()
                .and_then(|l| Span::from_location(l).or_else(|| span_at_line_column(text, l))),
        })?;
    yaml.keep_source(text);
    Ok(yaml)
}

/// The byte offset of a 1-based line and (character) column of `text`.
fn span_at_line_column(text: &str, location: serde_saphyr::Location) -> Option<Span> {
    let line = usize::try_from(location.line()).ok()?.checked_sub(1)?;
    let column = usize::try_from(location.column()).ok()?.saturating_sub(1);
    let line_start = if line == 0 {
        0
    } else {
        text.match_indices('\n').nth(line - 1)?.0 + 1
    };
    let rest = &text[line_start..];
    let offset = rest
        .char_indices()
        .nth(column)
        .map_or(rest.len(), |(i, _)| i);
    Some(Span {
        offset: line_start + offset,
        len: 0,
    })
}

/// The parser's message without its own snippet or location (we render those).
fn syntax_message(e: &serde_saphyr::Error) -> String {
    use serde_saphyr::Error;
    let mut inner = e;
    while let Error::AliasError { error, .. } | Error::WithSnippet { error, .. } = inner {
        inner = error;
    }
    match inner {
        Error::Budget { .. }
        | Error::AliasReplayLimitExceeded { .. }
        | Error::AliasReplayStackDepthExceeded { .. }
        | Error::AliasReplayCounterOverflow { .. } => {
            return "the document expands beyond the limits for a blueprint (too many aliases, anchors, nodes or nesting levels); write it out without deep alias chains".to_owned();
        }
        _ => {}
    }
    let text = e.without_snippet().to_string();
    let first = text.lines().next().unwrap_or("invalid YAML").trim();
    // Drop a trailing " at line L, column C" the parser adds; diagnostics show it.
    let first = match first.rfind(" at line ") {
        Some(i) => &first[..i],
        None => first,
    };
    let first = first.trim_end_matches(':');
    let mut message = String::new();
    let mut chars = first.chars();
    if let Some(c) = chars.next() {
        message.extend(c.to_lowercase());
        message.push_str(chars.as_str());
    }
    message
}

impl<'de> Deserialize<'de> for Yaml {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Value>::deserialize(d)?;
        Ok(Yaml::new(
            spanned.value,
            Span::from_location(spanned.referenced),
        ))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Value::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Value, E> {
        Ok(Value::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Yaml>()? {
            items.push(item);
        }
        Ok(Value::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut mapping = Mapping::default();
        while let Some(key) = map.next_key::<Spanned<KeyText>>()? {
            let key = Key {
                text: key.value.0,
                span: Span::from_location(key.referenced),
            };
            let value: Yaml = map.next_value()?;
            match mapping.entries.iter().find(|(k, _)| k.text == key.text) {
                Some((first, _)) => mapping.duplicates.push((first.clone(), key)),
                None => mapping.entries.push((key, value)),
            }
        }
        Ok(Value::Map(mapping))
    }
}

/// A mapping key read as text; `3:` and `true:` are keys too.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a scalar mapping key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<KeyText, E> {
                Ok(KeyText(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText("null".to_owned()))
            }
            fn visit_none<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText("null".to_owned()))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<KeyText, D::Error> {
                KeyText::deserialize(d)
            }
        }
        // As written: `n:` is the key "n", not a YAML 1.1 boolean.
        d.deserialize_string(V)
    }
}

/// An error reading a typed value out of the tree: the message, the field path from
/// where reading started, and the span of the value at fault.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeError {
    pub(crate) message: String,
    pub(crate) path: Vec<String>,
    pub(crate) span: Option<Span>,
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "field {:?}: ", self.path.join("."))?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError {
            message: msg.to_string(),
            path: Vec::new(),
            span: None,
        }
    }
}

impl DeError {
    fn at(mut self, span: Option<Span>) -> Self {
        if self.span.is_none() {
            self.span = span;
        }
        self
    }
}

impl<'de> Deserializer<'de> for &'de Yaml {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = match &self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Int(i) => visitor.visit_i64(*i),
            Value::Float(f) => visitor.visit_f64(*f),
            Value::Str(s) => visitor.visit_borrowed_str(s),
            Value::Seq(items) => visitor.visit_seq(SeqReader {
                items: items.iter(),
                index: 0,
            }),
            Value::Map(m) => visitor.visit_map(MapReader {
                entries: m.entries.iter(),
                current: None,
            }),
        };
        result.map_err(|e| e.at(self.span))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        };
        result.map_err(|e| e.at(self.span))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let result = match (&self.value, &self.source) {
            (Value::Int(_) | Value::Float(_) | Value::Bool(_), Some(source))
                if name == SCALAR_TEXT =>
            {
                visitor.visit_str(source)
            }
            _ => visitor.visit_newtype_struct(self),
        };
        result.map_err(|e| e.at(self.span))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_string(visitor)
    }

    /// A string field given a plain number or boolean: one error quoting the text as
    /// written, which asks for quotes (a number would print `3.10` as `3.1`).
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match (&self.value, &self.source) {
            (Value::Int(_) | Value::Float(_) | Value::Bool(_), Some(source)) => {
                let error: DeError = de::Error::custom(format!(
                    "expected a string, found {} written as {source}: put it in quotes (\"{source}\") for the text",
                    self.kind()
                ));
                Err(error.at(self.span))
            }
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let result = match &self.value {
            Value::Str(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            _ => Err(de::Error::custom(format!(
                "expected a name, found {}",
                self.kind()
            ))),
        };
        result.map_err(|e: DeError| e.at(self.span))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

struct SeqReader<'de> {
    items: std::slice::Iter<'de, Yaml>,
    index: usize,
}

impl<'de> SeqAccess<'de> for SeqReader<'de> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        seed.deserialize(item).map(Some).map_err(|e| {
            let mut e = e.at(item.span);
            e.path.insert(0, index.to_string());
            e
        })
    }
}

struct MapReader<'de> {
    entries: std::slice::Iter<'de, (Key, Yaml)>,
    current: Option<&'de (Key, Yaml)>,
}

impl<'de> MapAccess<'de> for MapReader<'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(entry) = self.entries.next() else {
            return Ok(None);
        };
        self.current = Some(entry);
        let key: de::value::BorrowedStrDeserializer<'de, DeError> =
            de::value::BorrowedStrDeserializer::new(&entry.0.text);
        seed.deserialize(key)
            .map(Some)
            .map_err(|e| e.at(entry.0.span))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some((key, value)) = self.current.take() else {
            return Err(de::Error::custom("value requested before its key"));
        };
        seed.deserialize(value).map_err(|e| {
            let mut e = e.at(value.span);
            e.path.insert(0, key.text.clone());
            e
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span_text(text: &str, span: Option<Span>) -> &str {
        let span = span.unwrap();
        &text[span.offset..span.offset + span.len]
    }

    #[test]
    fn values_remember_where_they_were_written() {
        let text = "a: 1\nb:\n  c: \"x y\"\n  d: [true, ~]\n";
        let tree = read(text).unwrap();
        let map = tree.as_map().unwrap();
        let b = map.get("b").unwrap().as_map().unwrap();
        let c = b.get("c").unwrap();
        assert_eq!(c.value, Value::Str("x y".into()));
        assert_eq!(span_text(text, c.span), "\"x y\"");
        assert_eq!(span_text(text, b.key("d").unwrap().span), "d");
    }

    #[test]
    fn duplicate_keys_are_set_aside_with_both_places() {
        let text = "a: 1\nb: 2\na: 3\n";
        let tree = read(text).unwrap();
        let map = tree.as_map().unwrap();
        assert_eq!(map.get("a").unwrap().value, Value::Int(1));
        let (first, again) = &map.duplicates[0];
        assert_eq!(first.span.unwrap().offset, 0);
        assert_eq!(again.span.unwrap().offset, 10);
    }

    #[test]
    fn an_alias_bomb_is_refused() {
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let prev = if i == 1 {
                "a".to_owned()
            } else {
                format!("a{}", i - 1)
            };
            text.push_str(&format!(
                "a{i}: &a{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
        }
        let err = read(&text).unwrap_err();
        assert!(!err.message.is_empty());
    }

    #[test]
    fn typed_reads_carry_the_span_and_path() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct T {
            n: u32,
        }
        let text = "x:\n  n: lots\n";
        let tree = read(text).unwrap();
        let x = tree.as_map().unwrap().get("x").unwrap();
        let err = T::deserialize(x).unwrap_err();
        assert_eq!(err.path, vec!["n".to_owned()]);
        assert_eq!(span_text(text, err.span), "lots");
    }
}
