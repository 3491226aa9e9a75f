//! The notes template and section parsing.

use memloop_core::tokens::TokenCounter;

/// The default notes template: ten H1 sections, each followed by an italic instruction line the
/// updater must keep.
pub const DEFAULT_TEMPLATE: &str = include_str!("../templates/session_memory_template.md");
/// The default update prompt (variables `currentNotes`, `notesPath`).
pub const DEFAULT_UPDATE_PROMPT: &str = include_str!("../templates/session_memory_update.md");
/// The reminder appended when the notes are over their caps.
pub const CONDENSE_REMINDER: &str = include_str!("../templates/session_memory_condense.md");

/// Whether a line is a section header (Markdown H1).
pub fn is_section_header(line: &str) -> bool {
    line.starts_with("# ") || line.trim_end() == "#"
}

/// Tracks fenced code blocks (```` ``` ```` or `~~~`) line by line: a `# ` line inside one is
/// code, not a section header.
#[derive(Debug, Default)]
struct Fences {
    open: Option<(char, usize)>,
}

impl Fences {
    /// Feed one line; `true` when it is a section header outside any code block.
    fn is_header(&mut self, line: &str) -> bool {
        let t = line.trim_start_matches(' ');
        let indent = line.len() - t.len();
        let fence = (indent < 4)
            .then(|| t.chars().next())
            .flatten()
            .filter(|c| *c == '`' || *c == '~')
            .map(|c| (c, t.chars().take_while(|x| *x == c).count()))
            .filter(|(_, n)| *n >= 3);
        match (self.open, fence) {
            (Some((c, n)), Some((fc, fnum)))
                if fc == c && fnum >= n && t.trim_end().len() == fnum =>
            {
                self.open = None;
                false
            }
            (Some(_), _) => false,
            (None, Some(f)) => {
                self.open = Some(f);
                false
            }
            (None, None) => is_section_header(line),
        }
    }
}

/// The immutable frame of a notes file: every header line with the line right under it when that
/// line is an italic instruction (`_..._` or `*...*`).
pub fn frame(text: &str) -> Vec<(String, Option<String>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut fences = Fences::default();
    for (i, line) in lines.iter().enumerate() {
        if fences.is_header(line) {
            let instruction = lines
                .get(i + 1)
                .map(|l| l.trim_end())
                .filter(|l| is_italic_line(l))
                .map(str::to_owned);
            out.push((line.trim_end().to_owned(), instruction));
        }
    }
    out
}

fn is_italic_line(line: &str) -> bool {
    let l = line.trim();
    l.len() >= 2
        && ((l.starts_with('_') && l.ends_with('_')) || (l.starts_with('*') && l.ends_with('*')))
}

/// One section of a notes file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section<'a> {
    /// The header line (`# Title`), or empty for text before the first header.
    pub header: &'a str,
    /// The whole section text, header included.
    pub text: &'a str,
}

/// Split notes into sections at header lines outside code blocks (text before the first header is its own section
/// with an empty header, when not blank).
pub fn sections(text: &str) -> Vec<Section<'_>> {
    let mut starts = Vec::new();
    let mut offset = 0;
    let mut fences = Fences::default();
    for line in text.split_inclusive('\n') {
        if fences.is_header(line.trim_end_matches(['\n', '\r'])) {
            starts.push(offset);
        }
        offset += line.len();
    }
    let mut out = Vec::new();
    if starts.first().copied().unwrap_or(text.len()) > 0 {
        let pre = &text[..starts.first().copied().unwrap_or(text.len())];
        if !pre.trim().is_empty() {
            out.push(Section {
                header: "",
                text: pre,
            });
        }
    }
    for (i, &s) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        let body = &text[s..end];
        let header = body.lines().next().unwrap_or("").trim_end();
        out.push(Section { header, text: body });
    }
    out
}

/// A section over its cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OversizedSection {
    /// Header line.
    pub header: String,
    /// Estimated tokens.
    pub tokens: u64,
}

/// Sections over `max_section_tokens`, largest first, and the total size of the notes.
pub fn oversized_sections(
    counter: &dyn TokenCounter,
    notes: &str,
    max_section_tokens: u64,
) -> (Vec<OversizedSection>, u64) {
    let total = counter.count(notes);
    let mut over: Vec<OversizedSection> = sections(notes)
        .into_iter()
        .map(|s| OversizedSection {
            header: s.header.to_owned(),
            tokens: counter.count(s.text),
        })
        .filter(|s| s.tokens > max_section_tokens)
        .collect();
    over.sort_by_key(|s| std::cmp::Reverse(s.tokens));
    (over, total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memloop_core::tokens::CharEstimator;

    #[test]
    fn default_template_has_the_ten_sections_each_with_an_instruction() {
        let f = frame(DEFAULT_TEMPLATE);
        let headers: Vec<&str> = f.iter().map(|(h, _)| h.as_str()).collect();
        assert_eq!(
            headers,
            [
                "# Session Title",
                "# Current State",
                "# Task specification",
                "# Files and Functions",
                "# Workflow",
                "# Errors & Corrections",
                "# Codebase and System Documentation",
                "# Learnings",
                "# Key results",
                "# Worklog",
            ]
        );
        assert!(f.iter().all(|(_, i)| i.is_some()));
    }

    #[test]
    fn oversized_sections_are_listed_largest_first() {
        let notes = format!(
            "# A\n_i_\n{}\n# B\n_i_\n{}\n# C\n_i_\nshort\n",
            "a".repeat(1_000),
            "b".repeat(2_000)
        );
        let (over, total) = oversized_sections(&CharEstimator, &notes, 100);
        assert_eq!(
            over.iter().map(|s| s.header.as_str()).collect::<Vec<_>>(),
            ["# B", "# A"]
        );
        assert!(total > 700);
        assert_eq!(sections(&notes).len(), 3);
        assert_eq!(sections("pre\n# A\nx").len(), 2);
    }
}
