//! Making untrusted text safe to print on a terminal.
//!
//! Model text, command output, tasks and errors can carry escape sequences that a
//! terminal obeys: `ESC]52;c;…BEL` writes the clipboard, `ESC]0;…BEL` sets the window
//! title, `ESC[2J` clears the screen, `\r` overwrites what was shown. Bidirectional
//! controls (U+202E RIGHT-TO-LEFT OVERRIDE, …) make a person read text in another order
//! than it is: `safe\u{202e}txt.exe` shows as `safeexe.txt`. [`safe`] removes the
//! former and shows the latter as visible marks (`<U+202E>`) before anything is printed
//! for a person; `--json` output needs no such care, since JSON escapes every control
//! character and a program reads it.

use std::borrow::Cow;

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';
/// C1 String Terminator.
const ST: char = '\u{9c}';

/// `text` without control characters: C0 other than `\n` and `\t`, DEL, C1
/// (U+0080–U+009F), and whole escape sequences (CSI `ESC[…`, OSC `ESC]…`, DCS, SOS,
/// PM and APC strings up to their terminator, and two-character escapes); and with
/// bidirectional controls made visible ([`visible_bidi`]).
pub(crate) fn safe(text: &str) -> Cow<'_, str> {
    match without_controls(text) {
        Cow::Borrowed(text) => visible_bidi(text),
        Cow::Owned(text) => Cow::Owned(visible_bidi(&text).into_owned()),
    }
}

/// Whether `c` changes the order in which text around it is shown: the embeddings and
/// overrides (U+202A–U+202E), the isolates (U+2066–U+2069), the marks U+200E, U+200F
/// and U+061C.
pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}'
    )
}

/// `text` with each bidirectional control ([`is_bidi_control`]) shown as `<U+XXXX>`
/// instead of obeyed. For text that may keep our own escape sequences (diagnostics
/// drawn in colour); [`safe`] does this too.
pub(crate) fn visible_bidi(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_bidi_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_bidi_control(c) {
            out.push_str(&format!("<U+{:04X}>", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` without control characters and escape sequences (see [`safe`]).
fn without_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !is_control(c) {
            out.push(c);
            continue;
        }
        match c {
            ESC => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // Intermediate bytes, then the final one (`ESC ( B`).
                Some(' '..='/') => {
                    while chars.next_if(|c| (' '..='/').contains(c)).is_some() {}
                    chars.next();
                }
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            _ => {}
        }
    }
    Cow::Owned(out)
}

fn is_control(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || c == ESC
}

/// Skips a CSI sequence's parameter and intermediate bytes and its final byte.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) || c.is_control() {
            return;
        }
    }
}

/// Skips a control string (OSC, DCS, ...) up to BEL, `ESC \` or ST.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            BEL | ST => return,
            ESC => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{safe, visible_bidi};

    #[test]
    fn escape_sequences_and_control_characters_are_removed() {
        let cases = [
            ("plain\ttext\n", "plain\ttext\n"),
            ("a\u{1b}]52;c;ZWNobyBoaQ==\u{7}b", "ab"),
            ("a\u{1b}]0;title\u{1b}\\b", "ab"),
            ("\u{1b}[2J\u{1b}[1;31mred\u{1b}[0m", "red"),
            ("a\u{1b}(Bb", "ab"),
            ("a\u{9b}2Jb\u{9d}0;t\u{9c}c", "abc"),
            ("over\rwrite\u{7f}\u{8}\u{0}", "overwrite"),
            ("unterminated \u{1b}]52;c;abc", "unterminated "),
            ("ünïcode ✓", "ünïcode ✓"),
        ];
        for (input, expected) in cases {
            assert_eq!(safe(input), expected, "{input:?}");
        }
    }

    #[test]
    fn bidirectional_controls_are_shown_not_obeyed() {
        assert_eq!(
            safe("safe\u{202e}txt.exe gnp\u{202c} ok"),
            "safe<U+202E>txt.exe gnp<U+202C> ok"
        );
        let all = "\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}\u{2066}\u{2067}\u{2068}\u{2069}\u{200e}\u{200f}\u{061c}";
        assert_eq!(
            safe(all),
            "<U+202A><U+202B><U+202C><U+202D><U+202E><U+2066><U+2067><U+2068><U+2069><U+200E><U+200F><U+061C>"
        );
        // Both kinds in one text; other format characters and RTL letters stay.
        assert_eq!(safe("\u{1b}[31ma\u{2067}b\u{200d}ש"), "a<U+2067>b\u{200d}ש");
        assert_eq!(visible_bidi("\u{1b}[1mx\u{202e}"), "\u{1b}[1mx<U+202E>");
    }
}
