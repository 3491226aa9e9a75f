//! Text columns that line up in a terminal whatever the script: widths are display columns
//! (a Han, Kana or Hangul character takes two, a combining mark none), and cuts fall on character
//! boundaries.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Display columns of `s`.
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `s` followed by spaces up to `columns` display columns (unchanged when already as wide).
pub fn pad(s: &str, columns: usize) -> String {
    let mut out = s.to_owned();
    out.extend(std::iter::repeat_n(' ', columns.saturating_sub(width(s))));
    out
}

/// `s` cut to at most `columns` display columns, on a character boundary, with `…` when cut.
pub fn clip(s: &str, columns: usize) -> String {
    if width(s) <= columns {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > columns {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_characters_count_twice_and_cuts_keep_characters_whole() {
        assert_eq!(width("数据库"), 6);
        assert_eq!(pad("数据库", 8), "数据库  ");
        assert_eq!(pad("db", 8), "db      ");
        assert_eq!(clip("数据库的备份策略", 7), "数据库…");
        assert_eq!(clip("캐시 정책", 20), "캐시 정책");
        assert_eq!(clip("abcdef", 4), "abc…");
    }
}
