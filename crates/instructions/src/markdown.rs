//! Markdown analysis for instruction bodies: block HTML comments, and the `@path`
//! references that sit in Markdown text (never in code blocks, code spans or HTML).

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::ops::Range;

/// Byte ranges of a Markdown body that are not Markdown text (code blocks, code spans, HTML),
/// and the block HTML comments to remove from the rendered content.
#[derive(Debug, Default, Clone)]
pub struct Analysis {
    /// Ranges where `@path` references are not recognised (sorted by start).
    pub excluded: Vec<Range<usize>>,
    /// Ranges of block-level `<!-- ... -->` comments, removed from the content.
    pub comments: Vec<Range<usize>>,
}

impl Analysis {
    fn is_excluded(&self, offset: usize) -> bool {
        self.excluded.iter().any(|r| r.contains(&offset))
    }
}

/// Parse `body` with pulldown-cmark and collect its non-text and comment ranges.
pub fn analyze(body: &str) -> Analysis {
    let mut analysis = Analysis::default();
    let parser = Parser::new_ext(body, Options::empty()).into_offset_iter();
    let mut skip_until_end: Option<TagEnd> = None;
    for (event, range) in parser {
        if let Some(end) = &skip_until_end {
            if matches!(&event, Event::End(e) if e == end) {
                skip_until_end = None;
            }
            continue;
        }
        match event {
            Event::Start(Tag::CodeBlock(_)) => {
                analysis.excluded.push(range);
                skip_until_end = Some(TagEnd::CodeBlock);
            }
            Event::Start(Tag::HtmlBlock) => {
                collect_block_comments(body, range.clone(), &mut analysis.comments);
                analysis.excluded.push(range);
                skip_until_end = Some(TagEnd::HtmlBlock);
            }
            Event::Code(_) | Event::Html(_) | Event::InlineHtml(_) => {
                analysis.excluded.push(range);
            }
            _ => {}
        }
    }
    analysis.excluded.sort_by_key(|r| r.start);
    analysis
}

fn collect_block_comments(body: &str, block: Range<usize>, out: &mut Vec<Range<usize>>) {
    let text = &body[block.clone()];
    let mut from = 0;
    while let Some(open) = text[from..].find("<!--") {
        let start = from + open;
        let end = match text[start + 4..].find("-->") {
            Some(close) => start + 4 + close + 3,
            None => text.len(),
        };
        // Swallow the rest of the line when only whitespace follows the comment.
        let rest_of_line = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
        let end = if text[end..rest_of_line].trim().is_empty() {
            rest_of_line
        } else {
            end
        };
        out.push(block.start + start..block.start + end);
        from = end;
    }
}

/// `body` without the block HTML comments found by [`analyze`].
pub fn strip_comments(body: &str, analysis: &Analysis) -> String {
    let mut out = String::with_capacity(body.len());
    let mut pos = 0;
    for range in &analysis.comments {
        if range.start >= pos {
            out.push_str(&body[pos..range.start]);
            pos = range.end;
        }
    }
    out.push_str(&body[pos.min(body.len())..]);
    out
}

/// One `@path` reference found in Markdown text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The token as written after `@` (escapes kept, fragment and trailing punctuation included).
    pub raw: String,
    /// The path: `\ ` unescaped to a space, `#fragment` and trailing sentence punctuation removed.
    pub target: String,
}

/// Every `@path` reference in `body` outside the excluded ranges.
///
/// The rule: `@` at the start of the body or right after whitespace, followed by a token that
/// starts with `./`, `../`, `~/`, `/` or an ASCII letter, digit, `_` or `.`, running to the next
/// unescaped whitespace. Whether the token is a file import is decided by the loader (it needs
/// the extension and the filesystem).
pub fn find_references(body: &str, analysis: &Analysis) -> Vec<Reference> {
    let mut refs = Vec::new();
    for (at, _) in body.match_indices('@') {
        let after_space = at == 0
            || body[..at]
                .chars()
                .next_back()
                .is_some_and(char::is_whitespace);
        if !after_space || analysis.is_excluded(at) {
            continue;
        }
        let (raw, target) = read_token(&body[at + 1..]);
        if target.is_empty() || !plausible_start(&target) {
            continue;
        }
        refs.push(Reference { raw, target });
    }
    refs
}

fn read_token(s: &str) -> (String, String) {
    let mut raw = String::new();
    let mut unescaped = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&' ') {
            chars.next();
            raw.push_str("\\ ");
            unescaped.push(' ');
            continue;
        }
        if c.is_whitespace() {
            break;
        }
        raw.push(c);
        unescaped.push(c);
    }
    let without_fragment = match unescaped.find('#') {
        Some(i) => &unescaped[..i],
        None => &unescaped[..],
    };
    let target = without_fragment
        .trim_end_matches([
            '.', ',', ';', ':', '!', '?', ')', ']', '}', '>', '"', '\'', '`',
        ])
        .to_owned();
    (raw, target)
}

fn plausible_start(target: &str) -> bool {
    if target.contains('\0') {
        return false;
    }
    if let Some(rest) = target.strip_prefix('~') {
        return rest.starts_with('/') && rest.len() > 1;
    }
    if target == "/" {
        return false;
    }
    target
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memloop_text::frontmatter::{Closing, split as split_frontmatter};

    fn targets(body: &str) -> Vec<String> {
        find_references(body, &analyze(body))
            .into_iter()
            .map(|r| r.target)
            .collect()
    }

    #[test]
    fn references_only_in_text() {
        let body = "See @a.md here.\n\n- @./b.md\n\n`@c.md`\n\n```\n@d.md\n```\n\n    @e.md\n\n<!-- @f.md -->\nmail user@g.md and @h\\ i.md#top\n";
        assert_eq!(targets(body), vec!["a.md", "./b.md", "h i.md"]);
    }

    #[test]
    fn block_comments_are_removed() {
        let body = "a\n\n<!-- hidden\nstill hidden -->\nb <!-- inline stays -->\n";
        let out = strip_comments(body, &analyze(body));
        assert_eq!(out, "a\n\nb <!-- inline stays -->\n");
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_offsets_stay_valid(
            text in "(---\n|<!--|-->|```|`|@|\\ |\n|    |[a-z./~#]|é|日|\u{1F600}){0,60}"
        ) {
            let split = split_frontmatter(&text, Closing::DashesOrDots);
            let analysis = analyze(split.body);
            let stripped = strip_comments(split.body, &analysis);
            proptest::prop_assert!(stripped.len() <= split.body.len());
            for reference in find_references(split.body, &analysis) {
                proptest::prop_assert!(!reference.target.is_empty());
                proptest::prop_assert!(!reference.target.contains('#'));
            }
        }
    }
}
