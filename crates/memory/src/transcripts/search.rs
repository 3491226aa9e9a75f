//! The bounded search over a project's transcripts.

use super::file::{TranscriptDir, TranscriptRecord};
use crate::types::MemoryError;
use std::io::{Read, Seek, SeekFrom};

/// How much a search may read and return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOptions {
    /// Hits returned at most. Default 10.
    pub limit: usize,
    /// Sessions searched at most, newest first. Default 50.
    pub max_sessions: usize,
    /// Bytes read per session at most: a larger transcript is searched in its newest part.
    /// Default 4 MiB.
    pub max_bytes_per_session: u64,
    /// Characters of text shown around a match. Default 240.
    pub snippet_chars: usize,
    /// A session left out (the current one: its conversation is already in context).
    pub exclude_session: Option<String>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            limit: 10,
            max_sessions: 50,
            max_bytes_per_session: 4 * 1024 * 1024,
            snippet_chars: 240,
            exclude_session: None,
        }
    }
}

/// One matching message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SearchHit {
    /// The session.
    pub session_id: String,
    /// When the message was written (RFC 3339, as recorded).
    pub timestamp: String,
    /// `user` or `assistant`.
    pub role: String,
    /// The text around the first match, whitespace collapsed.
    pub snippet: String,
}

/// The lowercase terms of a query (words of at least 2 characters).
fn terms(query: &str) -> Vec<String> {
    query
        .split_whitespace()
        .map(str::to_lowercase)
        .filter(|t| t.chars().count() >= 2)
        .collect()
}

/// The text around byte offset `at` of `text`, about `chars` characters, whitespace collapsed.
fn snippet(text: &str, at: usize, chars: usize) -> String {
    let before: Vec<usize> = text[..at].char_indices().map(|(i, _)| i).collect();
    let start = before
        .len()
        .checked_sub(chars / 2)
        .map_or(0, |k| before.get(k).copied().unwrap_or(0));
    let remaining = chars.saturating_sub(before.len().min(chars / 2));
    let end = text[at..]
        .char_indices()
        .nth(remaining)
        .map_or(text.len(), |(i, _)| at + i);
    let mut s = text[start..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if start > 0 {
        s.insert(0, '…');
    }
    if end < text.len() {
        s.push('…');
    }
    s
}

/// The newest `max` bytes of `path` (from a line start when cut).
fn read_tail(path: &std::path::Path, max: u64) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let cut = len > max;
    if cut {
        f.seek(SeekFrom::Start(len - max))?;
    }
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(if cut {
        text.split_once('\n')
            .map_or_else(String::new, |(_, rest)| rest.to_owned())
    } else {
        text
    })
}

impl TranscriptDir {
    /// Messages of past sessions containing every term of `query` (case-insensitive), newest
    /// session first, within `options`' bounds. An empty query finds nothing.
    pub fn search(
        &self,
        query: &str,
        options: &SearchOptions,
    ) -> Result<Vec<SearchHit>, MemoryError> {
        let terms = terms(query);
        let mut hits = Vec::new();
        if terms.is_empty() || options.limit == 0 {
            return Ok(hits);
        }
        let sessions = self
            .list()?
            .into_iter()
            .filter(|s| options.exclude_session.as_deref() != Some(s.id.as_str()))
            .take(options.max_sessions);
        for s in sessions {
            let text = match read_tail(&s.path, options.max_bytes_per_session) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(file = %s.path.display(), error = %e, "transcript unreadable; not searched");
                    continue;
                }
            };
            let transcript = super::file::Transcript::parse(&text, &s.path);
            for r in transcript.message_records() {
                if let Some(hit) = match_record(r, &s.id, &terms, options.snippet_chars) {
                    hits.push(hit);
                    if hits.len() >= options.limit {
                        return Ok(hits);
                    }
                }
            }
        }
        Ok(hits)
    }
}

fn match_record(
    r: &TranscriptRecord,
    session: &str,
    terms: &[String],
    snippet_chars: usize,
) -> Option<SearchHit> {
    let text = r.text();
    let lower = text.to_lowercase();
    // Lowercasing can change byte lengths; search and cut on the lowercased text then.
    let (hay, shown) = if lower.len() == text.len() {
        (lower.as_str(), text.as_str())
    } else {
        (lower.as_str(), lower.as_str())
    };
    if !terms.iter().all(|t| hay.contains(t.as_str())) {
        return None;
    }
    let at = hay.find(terms[0].as_str())?;
    Some(SearchHit {
        session_id: session.to_owned(),
        timestamp: r.timestamp.clone(),
        role: match r.kind {
            super::file::RecordKind::Assistant => "assistant",
            _ => "user",
        }
        .to_owned(),
        snippet: snippet(shown, at, snippet_chars.max(20)),
    })
}
