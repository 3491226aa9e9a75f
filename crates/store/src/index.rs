//! The index, `MEMORY.md` (one `- [Title](file.md) — hook` line per memory): entry lines, in-place
//! edits that leave every other line byte-for-byte alone, and the capped load used at session
//! start.

use crate::types::{IndexEntry, LoadedIndex};
use memloop_text::one_line;
use regex::Regex;
use std::sync::OnceLock;

/// File name of the index.
pub const INDEX_FILE: &str = "MEMORY.md";

/// Caps of the index (defaults in parentheses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexCaps {
    /// Lines loaded into a session (200).
    pub max_lines: usize,
    /// UTF-8 bytes loaded into a session (25,000).
    pub max_bytes: usize,
    /// Characters of an entry line memloop writes (150).
    pub max_entry_chars: usize,
}

impl Default for IndexCaps {
    fn default() -> Self {
        Self {
            max_lines: 200,
            max_bytes: 25_000,
            max_entry_chars: 150,
        }
    }
}

fn entry_re() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"^\s*[-*+]\s+\[([^\]]*)\]\(\s*(?:<((?:[^<>\\\n]|\\.)*)>|(?:\./)?([^)\s]+))\s*\)\s*(?:[—–-]+\s*(.*?))?\s*$",
        )
            .ok()
    })
    .as_ref()
}

/// Parse one index line `- [Title](file.md) — hook`; `None` for prose or anything else. An
/// em dash, en dash or hyphen separates the hook; a missing hook is empty. A file name with
/// spaces, parentheses or angle brackets is written as `(<my file.md>)` with `\` escapes, as
/// Markdown does. A byte-order mark before the line is ignored.
pub fn parse_entry_line(line: &str) -> Option<IndexEntry> {
    let line = line.strip_prefix('\u{feff}').unwrap_or(line);
    let c = entry_re()?.captures(line)?;
    let file = match (c.get(2), c.get(3)) {
        (Some(angle), _) => unescape(angle.as_str()),
        (None, Some(bare)) => bare.as_str().to_owned(),
        (None, None) => return None,
    };
    let file = file.strip_prefix("./").map(str::to_owned).unwrap_or(file);
    Some(IndexEntry {
        title: c[1].trim().to_owned(),
        file,
        hook: c.get(4).map_or("", |m| m.as_str()).to_owned(),
    })
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The link destination of `file`: bare when it has no spaces, parentheses, angle brackets or
/// backslashes, otherwise `<...>` with those escaped.
fn link_destination(file: &str) -> String {
    let needs_angle = file
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, '(' | ')' | '<' | '>' | '\\'));
    if !needs_angle {
        return file.to_owned();
    }
    let mut out = String::with_capacity(file.len() + 4);
    out.push('<');
    for c in file.chars() {
        if matches!(c, '<' | '>' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('>');
    out
}

/// All entry lines of an index, in order.
pub fn parse_entries(text: &str) -> Vec<IndexEntry> {
    text.lines().filter_map(parse_entry_line).collect()
}

/// Format an entry line, capped at `max_chars` characters: the hook is shortened first (with
/// `…`), then the title. Newlines in title or hook become spaces; brackets in the title become
/// parentheses so the link stays parseable.
pub fn format_entry_line(title: &str, file: &str, hook: &str, max_chars: usize) -> String {
    let mut title = one_line(title);
    if title.contains(['[', ']']) {
        title = title.replace('[', "(").replace(']', ")");
    }
    let mut hook = one_line(hook);
    let file = link_destination(file);
    // The characters of `- []({file}) — `.
    let fixed = 9 + file.chars().count();
    let room = max_chars.saturating_sub(fixed);
    let tchars = title.chars().count();
    if tchars > room / 2 && tchars + hook.chars().count() > room {
        title = shorten(&title, (room / 2).max(1));
    }
    let hook_room = room.saturating_sub(title.chars().count());
    if hook.chars().count() > hook_room {
        hook = shorten(&hook, hook_room);
    }
    if hook.is_empty() {
        format!("- [{title}]({file})")
    } else {
        format!("- [{title}]({file}) — {hook}")
    }
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out = out.trim_end().to_owned();
    out.push('…');
    out
}

fn same_file(a: &str, b: &str) -> bool {
    a.strip_prefix("./").unwrap_or(a) == b.strip_prefix("./").unwrap_or(b)
}

/// Whether `raw` is an entry line linking to `file`. A plain substring test on the file's last
/// segment rules out almost every line before the line parser runs, so an edit of a large index
/// costs a scan of its bytes, not a parse of each of its lines.
fn links_to(raw: &str, file: &str) -> bool {
    let last = file.rsplit('/').next().unwrap_or(file);
    let literal = !last.contains(['<', '>', '\\']);
    (!literal || raw.contains(last))
        && parse_entry_line(raw).is_some_and(|e| same_file(&e.file, file))
}

/// Add or replace the entry line for `file`. The first entry line linking to `file` is replaced
/// (later duplicates are removed); otherwise the line is appended. Every other line keeps its
/// bytes, and the file's line ending style (LF or CRLF) is used for the new line.
pub fn upsert_entry(text: &str, file: &str, line: &str) -> String {
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut out = String::with_capacity(text.len() + line.len() + 2);
    let mut placed = false;
    for raw in text.split_inclusive('\n') {
        let is_target = links_to(raw, file);
        if !is_target {
            out.push_str(raw);
        } else if !placed {
            if raw.starts_with('\u{feff}') {
                out.push('\u{feff}');
            }
            out.push_str(line);
            let ending = &raw[raw.trim_end_matches(['\r', '\n']).len()..];
            out.push_str(ending);
            placed = true;
        }
    }
    if !placed {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push_str(eol);
        }
        out.push_str(line);
        out.push_str(eol);
    }
    out
}

/// Remove every entry line linking to `file`; returns the new text and whether a line went.
pub fn remove_entry(text: &str, file: &str) -> (String, bool) {
    let mut removed = false;
    let out = text
        .split_inclusive('\n')
        .filter(|raw| {
            let hit = links_to(raw, file);
            removed |= hit;
            !hit
        })
        .collect();
    (out, removed)
}

/// Apply the session-load caps: trim; keep the first `max_lines` lines; then if
/// over `max_bytes` UTF-8 bytes cut at the last newline at or before that byte (a hard cut on a
/// char boundary if none); append a blank line and a warning naming the cap(s) that fired. The
/// byte cap is reported as fired only when it actually cut.
pub fn load_capped(text: &str, caps: IndexCaps) -> LoadedIndex {
    load_capped_start(text, IndexRest::Nothing, caps)
}

/// What a loader knows of an index beyond the start it read ([`load_capped_start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexRest {
    /// Nothing follows: the start is the whole index.
    Nothing,
    /// More text follows what was read (not whitespace alone); how many lines is not known.
    More,
    /// More text follows, and the index has this many lines in all (a store that keeps the
    /// count, or a reader that counted them without keeping their text).
    Counted(usize),
    /// More text follows, and the index has more lines than the line cap (how many more is
    /// not known).
    OverLines,
}

/// [`load_capped`] of an index of which only the start was read, so that loading costs what
/// it loads, not the index's size. When more follows, `start` must hold the index's first
/// `max_lines` lines, or at least `max_bytes + 1` bytes after its leading whitespace: the
/// loaded text is then what [`load_capped`] gives for the whole index. The line cap is
/// reported as fired when `rest` says the index is over it, or when it fires within what was
/// read. Without a count of lines, `original_lines` and `original_bytes` are what was read (a
/// lower bound), and the warning says the index is over the cap instead of its size.
pub fn load_capped_start(start: &str, rest: IndexRest, caps: IndexCaps) -> LoadedIndex {
    let trimmed = match rest {
        IndexRest::Nothing => start.trim(),
        _ => start.trim_start(),
    };
    let read_lines = if trimmed.is_empty() {
        0
    } else {
        trimmed.split('\n').count()
    };
    let (original_lines, lines_known) = match rest {
        IndexRest::Nothing => (read_lines, true),
        IndexRest::Counted(n) => (n.max(read_lines), true),
        IndexRest::More | IndexRest::OverLines => (read_lines, false),
    };
    let over_lines = rest == IndexRest::OverLines;
    let whole = rest == IndexRest::Nothing;
    let original_bytes = trimmed.len();
    let mut content: &str = trimmed;
    let by_lines = over_lines || original_lines > caps.max_lines;
    if by_lines {
        let end = trimmed
            .match_indices('\n')
            .nth(caps.max_lines.saturating_sub(1))
            .map_or(trimmed.len(), |(i, _)| i);
        let end = if caps.max_lines == 0 { 0 } else { end };
        content = &trimmed[..end];
    }
    let by_bytes = content.len() > caps.max_bytes;
    if by_bytes {
        let window = memloop_text::truncate_utf8(content, caps.max_bytes + 1);
        content = match window.rfind('\n') {
            Some(i) if i > 0 => &content[..i],
            _ => memloop_text::truncate_utf8(content, caps.max_bytes),
        };
    }
    let mut out = content.to_owned();
    let mut warning_line = None;
    if by_lines || by_bytes {
        let lines = if lines_known {
            format!("{original_lines} lines (limit {})", caps.max_lines)
        } else {
            format!("over {} lines (limit {})", caps.max_lines, caps.max_lines)
        };
        let bytes = if whole {
            format!("{original_bytes} bytes (limit {})", caps.max_bytes)
        } else {
            format!("over {} bytes (limit {})", caps.max_bytes, caps.max_bytes)
        };
        let reason = match (by_lines, by_bytes) {
            (true, true) => format!("{lines} and {bytes}"),
            (true, false) => lines,
            _ => bytes,
        };
        // Said in what was loaded; not logged at warn, which a server would do on every load.
        tracing::debug!(%reason, "MEMORY.md truncated on load");
        let warning = format!(
            "> WARNING: {INDEX_FILE} is {reason}, so only part of it was loaded. Keep index lines short and move details into topic files."
        );
        out.push_str("\n\n");
        out.push_str(&warning);
        warning_line = Some(warning);
    }
    LoadedIndex {
        warning: warning_line,
        content: out,
        truncated_by_lines: by_lines,
        truncated_by_bytes: by_bytes,
        original_lines,
        original_bytes,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod props;
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod examples {
    #[test]
    fn parse_entry_line_example() {
        use crate::index::parse_entry_line;
        let e = parse_entry_line("- [Testing](feedback_testing.md) — real db, no mocks").unwrap();
        assert_eq!(
            (e.title.as_str(), e.file.as_str(), e.hook.as_str()),
            ("Testing", "feedback_testing.md", "real db, no mocks")
        );
        assert!(parse_entry_line("See [Testing](feedback_testing.md) for details.").is_none());
    }

    #[test]
    fn format_entry_line_example() {
        use crate::index::format_entry_line;
        assert_eq!(
            format_entry_line("Tests", "tests.md", "real db", 150),
            "- [Tests](tests.md) — real db"
        );
        assert!(
            format_entry_line("T", "t.md", &"x".repeat(400), 150)
                .chars()
                .count()
                <= 150
        );
    }

    #[test]
    fn a_long_entry_fills_its_line() {
        use crate::index::format_entry_line;
        // Paths that need angle brackets, multi-byte titles, brackets in titles, long hooks:
        // a shortened line fills `max_chars` characters (one less where the cut fell after a
        // space, which is trimmed before the ellipsis).
        for file in ["t.md", "заметки/файл.md", "my notes (old).md", "a<b>.md"] {
            for title in ["T", "[draft] план", &"Überschrift ".repeat(30)] {
                let line = format_entry_line(title, file, &"подробности ".repeat(40), 150);
                let n = line.chars().count();
                assert!((149..=150).contains(&n), "{n}: {line}");
                assert!(!line.contains("[draft]"), "{line}");
            }
        }
    }

    #[test]
    fn load_capped_example() {
        use crate::index::IndexCaps;
        use crate::index::load_capped;
        let text = (0..250)
            .map(|i| format!("- [m{i}](m{i}.md)"))
            .collect::<Vec<_>>()
            .join("\n");
        let loaded = load_capped(&text, IndexCaps::default());
        assert!(loaded.truncated_by_lines && !loaded.truncated_by_bytes);
        assert!(loaded.content.ends_with(
            "only part of it was loaded. Keep index lines short and move details into topic files."
        ));
    }
}
