//! A memory's three tiers as the server serves them: L0, the one-line abstract (the frontmatter
//! `description`, what lists, the index and the selectors show); L1, a short overview (what
//! `context_load` and `context_search` show); L2, the full text (on request, `detail: "full"`).
//!
//! The overview lives at the end of the body, in an HTML comment block that Markdown renders
//! invisibly and Claude Code reads as part of the file:
//!
//! ```text
//! <the entry's text>
//!
//! <!-- memloop:overview
//! Two or three sentences written by the summary model.
//! -->
//! ```
//!
//! While the summary is still to be written the block is `<!-- memloop:summary pending -->`, so
//! a restarted server (or another one) can tell which entries are waiting. Without an overview,
//! L1 is the full text cut at [`L1_MAX_BYTES`] on a character boundary (safe for CJK).

use memloop_text::truncate_utf8;
use rmcp::schemars;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The largest L1 served when there is no overview: the full text is cut here (on a character
/// boundary) and marked with `…`.
pub const L1_MAX_BYTES: usize = 1024;

/// Marks an entry whose summary is still to be written.
pub(crate) const PENDING_MARK: &str = "<!-- memloop:summary pending -->";
/// Opens the overview block.
const OVERVIEW_OPEN: &str = "<!-- memloop:overview";
/// Closes an HTML comment.
const COMMENT_CLOSE: &str = "-->";

/// How much of an entry an answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    /// The overview (L1): the summary model's overview, else the text cut at 1 KiB. The default.
    #[default]
    Summary,
    /// The full text (L2), with the overview beside it when there is one.
    Full,
}

/// Where an entry's summary stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SummaryState {
    /// No summary block: written with summaries off, by hand, or the model failed every try.
    None,
    /// Waiting for the background summariser.
    Pending,
    /// The model's abstract and overview are stored.
    Written,
}

impl SummaryState {
    fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Pending => "pending",
            Self::Written => "written",
        }
    }
}

/// A body split into the entry's own text and its summary block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tiered {
    /// The full text (L2), without the summary block, newline-terminated when not empty.
    pub(crate) full: String,
    /// The model's overview, when written.
    pub(crate) overview: Option<String>,
    /// Where the summary stands.
    pub(crate) state: SummaryState,
}

fn terminated(text: &str) -> String {
    let t = text.trim_end();
    if t.is_empty() {
        String::new()
    } else {
        format!("{t}\n")
    }
}

/// Split `body` into its text and its trailing summary block (only a block that ends the body
/// counts; the same text elsewhere is the entry's own).
pub(crate) fn split(body: &str) -> Tiered {
    let trimmed = body.trim_end();
    if let Some(before) = trimmed.strip_suffix(PENDING_MARK) {
        return Tiered {
            full: terminated(before),
            overview: None,
            state: SummaryState::Pending,
        };
    }
    if let Some(inner_end) = trimmed.strip_suffix(COMMENT_CLOSE)
        && let Some(open) = inner_end.rfind(OVERVIEW_OPEN)
    {
        let inner = &inner_end[open + OVERVIEW_OPEN.len()..];
        if !inner.contains(COMMENT_CLOSE) && inner.starts_with(['\n', '\r']) {
            let overview = inner.trim();
            return Tiered {
                full: terminated(&inner_end[..open]),
                overview: (!overview.is_empty()).then(|| overview.to_owned()),
                state: SummaryState::Written,
            };
        }
    }
    Tiered {
        full: body.to_owned(),
        overview: None,
        state: SummaryState::None,
    }
}

/// `full` marked as waiting for its summary.
pub(crate) fn with_pending(full: &str) -> String {
    format!("{}\n{PENDING_MARK}\n", block_gap(full))
}

/// `full` with `overview` (already [`clean_overview`]ed) as its summary block.
pub(crate) fn with_overview(full: &str, overview: &str) -> String {
    format!(
        "{}\n{OVERVIEW_OPEN}\n{overview}\n{COMMENT_CLOSE}\n",
        block_gap(full)
    )
}

/// `full` followed by the blank line that separates it from a summary block.
fn block_gap(full: &str) -> String {
    let t = full.trim_end();
    if t.is_empty() {
        String::new()
    } else {
        format!("{t}\n")
    }
}

/// An overview fit for the block: comment delimiters defused (they would end the block early),
/// blank-line runs collapsed, at most `max_bytes` bytes on a character boundary.
pub(crate) fn clean_overview(text: &str, max_bytes: usize) -> String {
    let defused = text.replace(COMMENT_CLOSE, "->").replace("<!--", "<!-");
    let lines: Vec<&str> = defused
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    truncate_utf8(&lines.join("\n"), max_bytes)
        .trim()
        .to_owned()
}

/// L1 of `tiered`: the overview, else the full text cut at [`L1_MAX_BYTES`] (with `…`); and
/// whether it was cut.
pub(crate) fn l1(tiered: &Tiered) -> (String, bool) {
    if let Some(o) = &tiered.overview {
        return (o.clone(), false);
    }
    let full = tiered.full.trim_end();
    let cut = truncate_utf8(full, L1_MAX_BYTES);
    if cut.len() < full.len() {
        (format!("{}…", cut.trim_end()), true)
    } else {
        (full.to_owned(), false)
    }
}

/// The fields an answer carries for a memory's body at `detail`: `content` (L1 or L2), `tier`,
/// `summary` (`pending`, `written`, `none`), `content_cut` when L1 is a cut of the text, and
/// `overview` beside the full text.
pub(crate) fn body_fields(body: &str, detail: Detail) -> Map<String, Value> {
    let tiered = split(body);
    let mut m = Map::new();
    match detail {
        Detail::Summary => {
            let (text, cut) = l1(&tiered);
            m.insert("content".into(), json!(text));
            m.insert("tier".into(), json!("L1"));
            if cut {
                m.insert("content_cut".into(), json!(true));
            }
        }
        Detail::Full => {
            m.insert("content".into(), json!(tiered.full));
            m.insert("tier".into(), json!("L2"));
            if let Some(o) = &tiered.overview {
                m.insert("overview".into(), json!(o));
            }
        }
    }
    m.insert("summary_state".into(), json!(tiered.state.as_str()));
    m
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn blocks_round_trip_and_only_a_trailing_block_counts() {
        let full = "决定使用 PostgreSQL 16。\n\ntags: db\n";
        let pending = with_pending(full);
        assert_eq!(
            split(&pending),
            Tiered {
                full: full.into(),
                overview: None,
                state: SummaryState::Pending
            }
        );
        let written = with_overview(full, "团队选定 PostgreSQL 16。\n原因：JSONB。");
        let t = split(&written);
        assert_eq!(t.full, full);
        assert_eq!(
            t.overview.as_deref(),
            Some("团队选定 PostgreSQL 16。\n原因：JSONB。")
        );
        assert_eq!(t.state, SummaryState::Written);
        // The marker quoted inside the text is the entry's own.
        let quoted = format!("see {PENDING_MARK} in the docs\nmore text\n");
        assert_eq!(split(&quoted).state, SummaryState::None);
        assert_eq!(split(&quoted).full, quoted);
        // A comment that is not an overview block stays text.
        let other = "text\n<!-- a note -->\n";
        assert_eq!(split(other).state, SummaryState::None);
    }

    #[test]
    fn overviews_cannot_close_the_block_early() {
        let o = clean_overview("one --> two <!-- three\n\n\nfour", 1000);
        assert!(!o.contains("-->") && !o.contains("<!--"));
        let t = split(&with_overview("body\n", &o));
        assert_eq!(t.overview.as_deref(), Some(o.as_str()));
        assert_eq!(t.full, "body\n");
    }

    #[test]
    fn l1_cuts_long_text_on_a_character_boundary() {
        let long = "数据库迁移计划。".repeat(200); // 24 bytes a repeat
        let (text, cut) = l1(&split(&long));
        assert!(cut);
        let shown = text.strip_suffix('…').unwrap();
        assert!(shown.len() <= L1_MAX_BYTES && long.starts_with(shown));
        let (short, cut) = l1(&split("короткая заметка\n"));
        assert_eq!((short.as_str(), cut), ("короткая заметка", false));
        let clean = clean_overview(&"한국어 요약 ".repeat(300), 100);
        assert!(clean.len() <= 100 && "한국어 요약 ".repeat(300).starts_with(&clean));
    }
}
