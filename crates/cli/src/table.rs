//! Text columns that line up in a terminal whatever the script: widths are display columns
//! (a Han, Kana or Hangul character takes two, a combining mark none), and cuts fall between
//! user-perceived characters (grapheme clusters), so a vowel sign stays on its consonant and an
//! emoji sequence is kept or dropped whole.

use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

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

/// `s` on one line (every run of whitespace, line breaks included, is one space) and cut to at
/// most `columns` display columns, between grapheme clusters, with `…` when cut.
pub fn clip(s: &str, columns: usize) -> String {
    let s = memloop_text::one_line(s);
    if width(&s) <= columns {
        return s;
    }
    let mut out = String::new();
    let mut used = 0;
    for g in s.graphemes(true) {
        let w = width(g);
        if used + w + 1 > columns {
            break;
        }
        used += w;
        out.push_str(g);
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

    #[test]
    fn cuts_keep_grapheme_clusters_whole() {
        // A family emoji is one cluster of seven characters: kept whole or dropped whole.
        let family = "👨\u{200d}👩\u{200d}👧\u{200d}👦";
        assert_eq!(
            clip(&format!("{family} family trip"), 3),
            format!("{family}…")
        );
        assert_eq!(clip(&format!("{family} family trip"), 2), "…");
        // Devanagari: "स्ते" is one cluster (a consonant, virama, consonant and vowel sign).
        let hindi = "नमस्ते दुनिया";
        let cut = clip(hindi, 4);
        assert!(hindi.starts_with(cut.trim_end_matches('…')), "{cut}");
        assert!(!cut.trim_end_matches('…').ends_with('\u{94d}'), "{cut}");
        // Thai: a tone mark stays on its consonant.
        let thai = "สวัสดีชาวโลก";
        let cut = clip(thai, 3);
        assert!(thai.starts_with(cut.trim_end_matches('…')), "{cut}");
        assert!(width(&cut) <= 3, "{cut}");
        // Flags are pairs of regional indicators.
        assert_eq!(clip("🇯🇵🇰🇷🇨🇳", 5), "🇯🇵🇰🇷…");
        // A cell is one line.
        assert_eq!(clip("первая строка\n  вторая", 40), "первая строка вторая");
        assert_eq!(clip("", 3), "");
        assert_eq!(clip("\n\t", 3), "");
    }
}
