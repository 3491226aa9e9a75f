//! The text the filter reads, which is not always the text as written.
//!
//! Two readings are made, each only when the text needs it:
//!
//! - [`without_invisible`]: the text with every character that renders as nothing removed
//!   (soft hyphen, zero-width space and joiners, word joiner, bidirectional controls, byte order
//!   mark, variation selectors, tag characters, …). A credential split by one of them
//!   (`AKIA` + U+200B + `IOSFODNN7EXAMPLE`) is the same credential to whoever copies it, so every
//!   rule reads the text without them.
//! - [`joined`]: that text with every line break inside a token closed (`AKIAIOSF` at the end of
//!   one line, `ODNN7EXAMPLE` at the start of the next). Only the token shapes read it, and a
//!   match there counts only when it runs across a closed line break: joining lines never makes a
//!   credential of its own, and prose keeps its lines for the label rules.
//!
//! Each reading keeps where its bytes came from, so a credential found in it is redacted over the
//! whole span it covers in the text as written (the invisible characters and line breaks inside
//! it included), and nothing else of the text changes.

use std::borrow::Cow;
use std::ops::Range;

/// Whether `c` renders as nothing: the invisible format characters (Unicode general category
/// Cf: soft hyphen, Arabic letter mark, Mongolian vowel separator, zero-width space, non-joiner
/// and joiner, left-to-right and right-to-left marks, embeddings and overrides, word joiner,
/// invisible operators, isolates, deprecated format controls, byte order mark, interlinear
/// annotation marks, tag characters) and the other default-ignorable marks that can sit inside a
/// word unseen (combining grapheme joiner, Mongolian free variation selectors, variation
/// selectors).
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{180B}'..='\u{180F}'
        | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206F}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}' | '\u{E0001}' | '\u{E0020}'..='\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}')
}

/// A reading of a text with some byte ranges removed, and the way back to the text as written.
#[derive(Debug)]
pub(crate) struct Reading<'t> {
    text: Cow<'t, str>,
    /// Where each run of kept text starts: (offset in the reading, offset in the source),
    /// ascending. Empty when nothing was removed.
    runs: Vec<(usize, usize)>,
    /// Offsets in the reading where something was removed, ascending.
    cuts: Vec<usize>,
}

impl<'t> Reading<'t> {
    /// `source` with the byte ranges `removed` (ascending, not overlapping, on character
    /// boundaries) taken out.
    fn removing(source: &'t str, removed: &[Range<usize>]) -> Self {
        if removed.is_empty() {
            return Self {
                text: Cow::Borrowed(source),
                runs: Vec::new(),
                cuts: Vec::new(),
            };
        }
        let mut text = String::with_capacity(source.len());
        let mut runs = Vec::with_capacity(removed.len() + 1);
        let mut cuts = Vec::with_capacity(removed.len());
        let mut at = 0;
        for r in removed {
            if r.start > at {
                runs.push((text.len(), at));
                text.push_str(source.get(at..r.start).unwrap_or(""));
            }
            if cuts.last() != Some(&text.len()) {
                cuts.push(text.len());
            }
            at = at.max(r.end);
        }
        if at < source.len() {
            runs.push((text.len(), at));
            text.push_str(source.get(at..).unwrap_or(""));
        }
        Self {
            text: Cow::Owned(text),
            runs,
            cuts,
        }
    }

    /// The text as read.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Whether something was removed: the reading is not the source.
    pub(crate) fn is_edited(&self) -> bool {
        matches!(self.text, Cow::Owned(_))
    }

    /// The offset in the source of the character at `at` in the reading (after whatever was
    /// removed just before it).
    fn start(&self, at: usize) -> usize {
        let i = self.runs.partition_point(|&(read, _)| read <= at);
        match i.checked_sub(1).and_then(|i| self.runs.get(i)) {
            Some(&(read, source)) => source + (at - read),
            None => self.runs.first().map_or(at, |&(_, source)| source),
        }
    }

    /// The offset in the source just past the character that ends at `at` in the reading
    /// (before whatever was removed just after it).
    fn end(&self, at: usize) -> usize {
        let i = self.runs.partition_point(|&(read, _)| read < at);
        match i.checked_sub(1).and_then(|i| self.runs.get(i)) {
            Some(&(read, source)) => source + (at - read),
            None => self.start(at),
        }
    }

    /// The span of the source a span of the reading covers: from its first character to its
    /// last, with whatever was removed between them.
    pub(crate) fn source_range(&self, r: &Range<usize>) -> Range<usize> {
        if !self.is_edited() {
            return r.clone();
        }
        let start = self.start(r.start);
        start..self.end(r.end).max(start)
    }

    /// Whether something was removed strictly inside `r` (a span of the reading).
    pub(crate) fn cut_inside(&self, r: &Range<usize>) -> bool {
        let i = self.cuts.partition_point(|&c| c <= r.start);
        self.cuts.get(i).is_some_and(|&c| c < r.end)
    }
}

/// `text` without its invisible characters ([`is_invisible`]); borrowed, with no copy, when it
/// has none.
pub(crate) fn without_invisible(text: &str) -> Reading<'_> {
    let Some(first) = maybe_invisible(text.as_bytes()) else {
        return Reading::removing(text, &[]);
    };
    let removed: Vec<Range<usize>> = text
        .get(first..)
        .unwrap_or("")
        .char_indices()
        .filter(|&(_, c)| is_invisible(c))
        .map(|(i, c)| first + i..first + i + c.len_utf8())
        .collect();
    Reading::removing(text, &removed)
}

/// Where the first character that may be invisible ([`is_invisible`]) starts, judged on its
/// first two bytes; `None` when there is none. Every text runs this, so it reads bytes and
/// decodes no character: most of the text is ASCII, Cyrillic or Han, whose first bytes are
/// none of the lead bytes of an invisible character.
fn maybe_invisible(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| match w[0] {
        0xC2 => w[1] == 0xAD,
        0xCD => w[1] == 0x8F,
        0xD8 => w[1] == 0x9C,
        0xE1 | 0xF3 => w[1] == 0xA0,
        0xE2 => matches!(w[1], 0x80 | 0x81),
        0xEF => matches!(w[1], 0xB8 | 0xBB | 0xBF),
        _ => false,
    })
}

/// Characters a token is made of, for joining lines: ASCII letters and digits, and the
/// punctuation of token and base64 alphabets (`_`, `-`, `+`, `/`, `=`).
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'/' | b'=')
}

/// The fewest characters a token broken over lines must have to be read joined: the shortest
/// token shape the filter knows (`xoxb-` and eight characters) is thirteen.
const MIN_JOINED: usize = 13;

/// The most line breaks one credential is read across.
const MAX_JOINED_BREAKS: usize = 16;

/// A text with its line breaks inside tokens closed ([`joined`]), and the parts of it to read.
#[derive(Debug)]
pub(crate) struct Joined<'t> {
    /// The text with the line breaks closed, and the way back.
    pub(crate) reading: Reading<'t>,
    /// Spans of the reading to match a token shape in: each runs across at least one closed
    /// line break, and starts and ends at a closed line break or at the line around the token.
    pub(crate) windows: Vec<Range<usize>>,
}

/// `text` with every line break inside a token closed, or `None` when it has none.
///
/// A line break is inside a token when a token character ([`token_byte`]) comes right before it
/// and right after it: one `\n` or `\r\n`, with any spaces or tabs at the end of the line before
/// and the indentation of the next line (a key pasted into an indented block keeps its
/// characters). A blank line ends a token. Only tokens that could be a credential are joined:
/// at least [`MIN_JOINED`] characters in all, and a digit, a token punctuation character or two
/// capitals among them, so prose wrapped between two words (`the quick` / `brown fox`) is never
/// copied and read again.
///
/// A closed line break may still be where a credential starts or ends (a word at the end of the
/// line before it, `and` / `wJalrXUtn…`; a word on the line after it), so the token is read in
/// windows: from the start of its first line or any of its closed line breaks, to any later
/// closed line break or the end of its last line, across [`MAX_JOINED_BREAKS`] at most.
pub(crate) fn joined(text: &str) -> Option<Joined<'_>> {
    let bytes = text.as_bytes();
    let mut breaks: Vec<Range<usize>> = Vec::new();
    for (i, _) in text.match_indices('\n') {
        let mut start = i;
        if start > 0 && bytes[start - 1] == b'\r' {
            start -= 1;
        }
        while start > 0 && matches!(bytes[start - 1], b' ' | b'\t') {
            start -= 1;
        }
        let mut end = i + 1;
        while end < bytes.len() && matches!(bytes[end], b' ' | b'\t') {
            end += 1;
        }
        if start > 0 && end < bytes.len() && token_byte(bytes[start - 1]) && token_byte(bytes[end])
        {
            breaks.push(start..end);
        }
    }
    if breaks.is_empty() {
        return None;
    }
    // Group the breaks of one token (`AKIA` / `IOSF` / `ODNN` / `7EXAMPLE` is one token over
    // four lines) and keep the groups whose characters could make a credential.
    let mut kept: Vec<Range<usize>> = Vec::new();
    let mut groups: Vec<usize> = Vec::new();
    let mut k = 0;
    while k < breaks.len() {
        let first = k;
        let mut from = breaks[k].start;
        while from > 0 && token_byte(bytes[from - 1]) {
            from -= 1;
        }
        let mut shape = TokenShape::default();
        shape.add(&bytes[from..breaks[k].start]);
        loop {
            let mut to = breaks[k].end;
            while to < bytes.len() && token_byte(bytes[to]) {
                to += 1;
            }
            shape.add(&bytes[breaks[k].end..to]);
            match breaks.get(k + 1) {
                Some(next) if next.start == to => k += 1,
                _ => break,
            }
        }
        if shape.could_be_credential() {
            kept.extend(breaks[first..=k].iter().cloned());
            groups.push(k + 1 - first);
        }
        k += 1;
    }
    if kept.is_empty() {
        return None;
    }
    // Each kept line break is one cut of the reading, in order.
    let reading = Reading::removing(text, &kept);
    let read = reading.text();
    let mut windows = Vec::new();
    let mut cuts = reading.cuts.as_slice();
    for n in groups {
        let (group, rest) = cuts.split_at(n.min(cuts.len()));
        cuts = rest;
        let (Some(&first), Some(&last)) = (group.first(), group.last()) else {
            continue;
        };
        let line_start = read[..first].rfind('\n').map_or(0, |i| i + 1);
        let line_end = read[last..].find('\n').map_or(read.len(), |i| last + i);
        // Window `from` starts at the line's start (0) or after cut `from - 1`; window `to`
        // ends at cut `to` or at the line's end (`n`); it runs across cuts `from..to`.
        for from in 0..n {
            let start = if from == 0 {
                line_start
            } else {
                group[from - 1]
            };
            for to in from + 1..=n.min(from + MAX_JOINED_BREAKS) {
                let end = group.get(to).copied().unwrap_or(line_end);
                windows.push(start..end);
            }
        }
    }
    Some(Joined { reading, windows })
}

/// What a token broken over lines is made of.
#[derive(Debug, Default)]
struct TokenShape {
    len: usize,
    capitals: usize,
    /// Digits and token punctuation.
    others: usize,
}

impl TokenShape {
    fn add(&mut self, part: &[u8]) {
        self.len += part.len();
        for &b in part {
            if b.is_ascii_uppercase() {
                self.capitals += 1;
            } else if !b.is_ascii_lowercase() {
                self.others += 1;
            }
        }
    }

    /// Long enough for the shortest token shape, and not a run of plain words: a digit or a
    /// token punctuation character, or two capitals.
    fn could_be_credential(&self) -> bool {
        self.len >= MIN_JOINED && (self.others > 0 || self.capitals >= 2)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Spans of a reading map back onto the text as written, over multi-byte characters and
    /// whatever was removed inside them, and nowhere else.
    #[test]
    fn spans_map_back_over_removed_characters() {
        let text = "ключ 密钥\u{200B}AB\u{200C}\u{FEFF}CD é";
        let r = without_invisible(text);
        assert_eq!(r.text(), "ключ 密钥ABCD é");
        let at = r.text().find("AB").unwrap();
        let span = at..at + "ABCD".len();
        assert_eq!(&text[r.source_range(&span)], "AB\u{200C}\u{FEFF}CD");
        assert!(r.cut_inside(&span));
        // A span that ends before a removed character does not take it.
        assert_eq!(&text[r.source_range(&(at..at + 2))], "AB");
        assert!(!r.cut_inside(&(at..at + 2)));
        let e = r.text().find('é').unwrap();
        assert_eq!(&text[r.source_range(&(e..e + 'é'.len_utf8()))], "é");
        assert_eq!(
            &text[r.source_range(&(0..r.text().len()))],
            text.trim_start()
        );
    }

    /// Every invisible character is one [`maybe_invisible`] stops at.
    #[test]
    fn the_byte_test_misses_no_invisible_character() {
        for c in (0..=0x10FFFF)
            .filter_map(char::from_u32)
            .filter(|c| is_invisible(*c))
        {
            let text = format!("密码 é{c}x");
            assert_eq!(maybe_invisible(text.as_bytes()), text.find(c), "{c:?}");
        }
    }

    /// Text with nothing to remove is read as it is, without a copy.
    #[test]
    fn plain_text_is_borrowed() {
        for text in [
            "plain ASCII",
            "Пароль меняют раз в квартал. 密码每季度轮换。",
        ] {
            let r = without_invisible(text);
            assert!(!r.is_edited());
            assert_eq!(r.source_range(&(2..5)), 2..5);
        }
        assert!(joined("the quick\nbrown fox\njumps over the lazy dog").is_none());
    }

    /// A line break inside a token is closed, indentation and `\r\n` included; a blank line, a
    /// break between plain words and a break next to punctuation are not.
    #[test]
    fn line_breaks_inside_tokens_are_closed() {
        let text = "ключ:\n  AKIAIOSF \r\n    ODNN7EXAMPLE\nи всё";
        let j = joined(text).unwrap();
        let r = &j.reading;
        assert_eq!(r.text(), "ключ:\n  AKIAIOSFODNN7EXAMPLE\nи всё");
        // One window: the whole line the token is on.
        assert_eq!(
            j.windows
                .iter()
                .map(|w| &r.text()[w.clone()])
                .collect::<Vec<_>>(),
            ["  AKIAIOSFODNN7EXAMPLE"]
        );
        let at = r.text().find("AKIA").unwrap();
        let span = at..at + "AKIAIOSFODNN7EXAMPLE".len();
        assert!(r.cut_inside(&span));
        assert_eq!(
            &text[r.source_range(&span)],
            "AKIAIOSF \r\n    ODNN7EXAMPLE"
        );
        // Four short lines make one token.
        let j = joined("AKIA\nIOSF\nODNN\n7EXAMPLE").unwrap();
        assert_eq!(j.reading.text(), "AKIAIOSFODNN7EXAMPLE");
        // Every break is also tried as where the token starts or ends.
        let windows: Vec<&str> = j
            .windows
            .iter()
            .map(|w| &j.reading.text()[w.clone()])
            .collect();
        assert_eq!(
            windows,
            [
                "AKIAIOSF",
                "AKIAIOSFODNN",
                "AKIAIOSFODNN7EXAMPLE",
                "IOSFODNN",
                "IOSFODNN7EXAMPLE",
                "ODNN7EXAMPLE"
            ]
        );
        assert!(joined("AKIAIOSF\n\nODNN7EXAMPLE").is_none());
        assert!(joined("configuration\nsettings are documented").is_none());
        assert!(joined("end of it.\nNext2024 line").is_none());
    }
}
