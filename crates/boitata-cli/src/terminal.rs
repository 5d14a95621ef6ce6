//! Making untrusted text safe to print on a terminal.
//!
//! Model text, command output, tasks and errors can carry escape sequences that a
//! terminal obeys: `ESC]52;c;…BEL` writes the clipboard, `ESC]0;…BEL` sets the window
//! title, `ESC[2J` clears the screen, `\r` overwrites what was shown. [`safe`] removes
//! them before anything is printed for a person; `--json` output needs no such care,
//! since JSON escapes every control character.

use std::borrow::Cow;

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';
/// C1 String Terminator.
const ST: char = '\u{9c}';

/// `text` without control characters: C0 other than `\n` and `\t`, DEL, C1
/// (U+0080–U+009F), and whole escape sequences (CSI `ESC[…`, OSC `ESC]…`, DCS, SOS,
/// PM and APC strings up to their terminator, and two-character escapes).
pub(crate) fn safe(text: &str) -> Cow<'_, str> {
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
    use super::safe;

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
}
