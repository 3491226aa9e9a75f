//! How `context_save` entries map onto memloop memories.
//!
//! | entry type | memory type | file |
//! |---|---|---|
//! | `session_summary` | `project` | `sessions/<utc-timestamp>-<slug>-<unique>.md` (one file per summary) |
//! | `decision` | `project` | `decisions/<slug>.md` (same title = the decision is updated) |
//! | `change` | `project` | `changes/<utc-timestamp>-<slug>-<unique>.md` (one file per change) |
//! | `knowledge` | `reference` | `knowledge/<slug>.md` (same title = updated) |
//! | `todo` | `project` | `todos/<slug>.md` (open until deleted with `context_manage`) |
//!
//! `<slug>` is the title (or the first line of the content) as a file stem
//! ([`title_file_stem`]): a title of ASCII letters, digits and spaces lowercased, spaces as `-`
//! (at most 60 characters); any other title transliterated to ASCII with `_` and 8 hex digits of
//! a hash of the title appended, so titles in any script (or only emoji, or differing only in
//! punctuation) never share a file. Titles that differ only in case or spacing are the same
//! title. A keyed entry saved before this rule, under the old slug
//! ([`slug`]) and with the same title, keeps its file.

use chrono::{DateTime, Utc};
use memloop_store::{MemoryDoc, MemoryType, title_file_stem};
use rmcp::schemars;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};

/// The kinds of entry `context_save` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    /// What happened in a session (one file per summary, never overwritten).
    SessionSummary,
    /// A decision and its reason (keyed by title: saving the same title updates it).
    Decision,
    /// A change made to the project (one file per change).
    Change,
    /// A durable fact about the project or a pointer to where it lives (keyed by title).
    Knowledge,
    /// Something still to do (keyed by title; delete it when done).
    Todo,
}

/// A search scope: one folder, or all of them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every memory (including memories not written through this server).
    #[default]
    All,
    /// `sessions/`.
    Sessions,
    /// `decisions/`.
    Decisions,
    /// `changes/`.
    Changes,
    /// `knowledge/`.
    Knowledge,
}

impl Scope {
    /// Whether a memory at `rel_path` is in this scope.
    pub fn contains(self, rel_path: &str) -> bool {
        match self {
            Self::All => true,
            Self::Sessions => rel_path.starts_with("sessions/"),
            Self::Decisions => rel_path.starts_with("decisions/"),
            Self::Changes => rel_path.starts_with("changes/"),
            Self::Knowledge => rel_path.starts_with("knowledge/"),
        }
    }
}

impl EntryType {
    /// The folder (inside the memory dir) entries of this type go to.
    pub fn folder(self) -> &'static str {
        match self {
            Self::SessionSummary => "sessions",
            Self::Decision => "decisions",
            Self::Change => "changes",
            Self::Knowledge => "knowledge",
            Self::Todo => "todos",
        }
    }

    /// The memory type written in the frontmatter.
    pub fn memory_type(self) -> MemoryType {
        match self {
            Self::Knowledge => MemoryType::Reference,
            _ => MemoryType::Project,
        }
    }

    /// Whether every entry gets its own file (timestamped) instead of being keyed by title.
    pub(crate) fn append_only(self) -> bool {
        matches!(self, Self::SessionSummary | Self::Change)
    }

    /// The `type` name as the client spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionSummary => "session_summary",
            Self::Decision => "decision",
            Self::Change => "change",
            Self::Knowledge => "knowledge",
            Self::Todo => "todo",
        }
    }
}

/// `text` as a file-name slug (empty when it has no ASCII letter or digit): the file naming rule
/// before [`title_file_stem`], which collapsed titles differing only outside ASCII onto one file.
/// Still used to find an entry saved under it ([`legacy_path`]).
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if out.len() >= 60 {
                break;
            }
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_owned()
}

/// First non-empty line of `content`, at most `max` characters.
pub(crate) fn first_line(content: &str, max: usize) -> String {
    let line = content
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line = line.trim_start_matches('#').trim();
    line.chars().take(max).collect()
}

/// A unique suffix for append-only entries: 6 hex characters of a hash of the time, the
/// process and a counter, so concurrent writers (in one process or many) never collide.
fn unique_suffix(now: DateTime<Utc>, content: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut h = Sha256::new();
    h.update(now.timestamp_nanos_opt().unwrap_or_default().to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(n.to_le_bytes());
    h.update(content.as_bytes());
    h.finalize()
        .iter()
        .take(3)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The entry's title: the given one, else the content's first line.
fn entry_title(title: Option<&str>, content: &str) -> String {
    title
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map_or_else(|| first_line(content, 80), str::to_owned)
}

/// Where a keyed entry (decision, knowledge, todo) with this title was stored under the naming
/// rule before [`title_file_stem`], when that differs from today's path; `None` for append-only
/// entries. A save whose new path does not exist yet updates this file instead when it holds a
/// memory with the same title, so entries saved before the rule changed are not duplicated.
pub fn legacy_path(kind: EntryType, title: Option<&str>, content: &str) -> Option<String> {
    if kind.append_only() {
        return None;
    }
    let title = entry_title(title, content);
    let mut stem = slug(&title);
    if stem.is_empty() {
        stem = kind.as_str().replace('_', "-");
    }
    let old = format!("{}/{stem}.md", kind.folder());
    let new = format!(
        "{}/{}.md",
        kind.folder(),
        title_file_stem(&title, &kind.as_str().replace('_', "-"))
    );
    (old != new).then_some(old)
}

/// The store-relative path and document for one entry.
pub fn entry_to_memory(
    kind: EntryType,
    title: Option<&str>,
    content: &str,
    tags: &[String],
    now: DateTime<Utc>,
) -> (String, MemoryDoc) {
    let title = entry_title(title, content);
    let stem = title_file_stem(&title, &kind.as_str().replace('_', "-"));
    let rel = if kind.append_only() {
        format!(
            "{}/{}-{stem}-{}.md",
            kind.folder(),
            now.format("%Y%m%dT%H%M%SZ"),
            unique_suffix(now, content)
        )
    } else {
        format!("{}/{stem}.md", kind.folder())
    };
    let mut description = first_line(content, 150);
    if description.is_empty() {
        description = title.clone();
    }
    let mut body = content.trim_end().to_owned();
    body.push('\n');
    if !tags.is_empty() {
        body.push_str(&format!("\ntags: {}\n", tags.join(", ")));
    }
    let name = if title.is_empty() {
        kind.as_str().to_owned()
    } else {
        title
    };
    (
        rel,
        MemoryDoc::new(name, description, kind.memory_type(), body),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use memloop_store::validate_rel_path;

    #[test]
    fn the_old_slug_keeps_ascii_words_and_drops_paths() {
        assert_eq!(
            slug("Use Postgres 16, not MySQL!"),
            "use-postgres-16-not-mysql"
        );
        assert_eq!(slug("../../etc"), "etc");
    }

    #[test]
    fn every_entry_type_maps_to_a_valid_path() {
        let now = Utc::now();
        for kind in [
            EntryType::SessionSummary,
            EntryType::Decision,
            EntryType::Change,
            EntryType::Knowledge,
            EntryType::Todo,
        ] {
            for title in [Some("../../etc/passwd"), Some("???"), None, Some(".hidden")] {
                let (rel, doc) = entry_to_memory(kind, title, "# Body\nmore", &[], now);
                assert!(validate_rel_path(&rel).is_ok(), "{rel}");
                assert!(rel.starts_with(kind.folder()), "{rel}");
                assert_eq!(doc.memory_type, Some(kind.memory_type()));
                assert!(!doc.name.is_empty() && !doc.description.is_empty());
            }
        }
    }

    #[test]
    fn append_only_entries_never_share_a_path() {
        let now = Utc::now();
        let a = entry_to_memory(EntryType::Change, Some("x"), "same", &[], now).0;
        let b = entry_to_memory(EntryType::Change, Some("x"), "same", &[], now).0;
        assert_ne!(a, b);
        let d1 = entry_to_memory(EntryType::Decision, Some("DB"), "a", &[], now).0;
        let d2 = entry_to_memory(EntryType::Decision, Some("DB"), "b", &[], now).0;
        assert_eq!(d1, d2);
    }
}
