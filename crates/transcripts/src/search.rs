//! The bounded search over a project's transcripts.

use crate::file::{TranscriptDir, TranscriptRecord};
use memloop_store::MemoryError;
use memloop_text::{Analyzer, Language, fold_with_offsets, normalize, words};
use std::collections::BTreeSet;
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
    /// Characters of text shown around a match, counted as user-perceived characters (grapheme
    /// clusters: a conjunct or an emoji sequence is one, and is never cut). Default 240.
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
    /// The text around the first match, whitespace collapsed, credentials replaced by
    /// `[redacted: …]` markers.
    pub snippet: String,
}

/// What a search looks for: the query's analysed terms (the recall analyzer: NFKC, case folded,
/// stop words dropped, stemmed, Han/Kana/Thai as character bigrams), so a Chinese query with no
/// spaces finds a message whose words come in another order and `база данных` finds `базы
/// данных`. Latin-script words are stemmed in the language of the message they are compared
/// with (detected per message), so `contraseña` finds `contraseñas`. A query of stop words only
/// (in that language) falls back to its plain normalised words.
struct Query {
    analyzer: Analyzer,
    /// Per language (in [`Language::ALL`] order): the terms a message in that language must all
    /// contain, and whether they are analysed terms (else plain normalised words).
    by_language: Vec<(BTreeSet<String>, bool)>,
    /// The query's normalised words, for placing the snippet.
    words: Vec<String>,
}

impl Query {
    fn new(query: &str) -> Self {
        let analyzer = Analyzer::new(false);
        let words: Vec<String> = words(query).collect();
        let by_language = Language::ALL
            .iter()
            .map(|lang| {
                let mut analysed_terms: BTreeSet<String> =
                    analyzer.unigrams_in(query, *lang).into_iter().collect();
                // In Japanese a change between kanji, hiragana and katakana usually marks a word
                // boundary: a bigram across one is not required (金曜日デプロイ finds
                // デプロイは金曜日).
                let within_words: BTreeSet<String> = analysed_terms
                    .iter()
                    .filter(|t| !crosses_kana_boundary(t))
                    .cloned()
                    .collect();
                if !within_words.is_empty() {
                    analysed_terms = within_words;
                }
                if analysed_terms.is_empty() {
                    (words.iter().cloned().collect(), false)
                } else {
                    (analysed_terms, true)
                }
            })
            .collect();
        Self {
            analyzer,
            by_language,
            words,
        }
    }

    /// Whether the query has nothing to look for.
    fn is_empty(&self) -> bool {
        self.by_language.iter().all(|(terms, _)| terms.is_empty())
    }

    fn matches(&self, text: &str) -> bool {
        let lang = self.analyzer.language_of(text);
        let Some((terms, analysed)) = self.by_language.get(lang.index()) else {
            return false;
        };
        if terms.is_empty() {
            return false;
        }
        let found: BTreeSet<String> = if *analysed {
            self.analyzer.unigrams_in(text, lang).into_iter().collect()
        } else {
            words(text).collect()
        };
        terms.iter().all(|t| found.contains(t))
    }
}

/// Which of kanji (Han), hiragana and katakana `c` is, if any.
fn japanese_kind(c: char) -> Option<u8> {
    match c {
        '\u{3040}'..='\u{309F}' => Some(1),
        '\u{30A0}'..='\u{30FF}' | '\u{31F0}'..='\u{31FF}' => Some(2),
        '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' => Some(3),
        _ => None,
    }
}

/// Whether `term` is a two-character gram whose characters are of different Japanese kinds.
fn crosses_kana_boundary(term: &str) -> bool {
    let mut chars = term.chars();
    match (chars.next(), chars.next(), chars.next()) {
        (Some(a), Some(b), None) => match (japanese_kind(a), japanese_kind(b)) {
            (Some(x), Some(y)) => x != y,
            _ => false,
        },
        _ => false,
    }
}

/// The text around byte offset `at` of `text`, about `chars` user-perceived characters (cut
/// between grapheme clusters), whitespace collapsed.
fn snippet(text: &str, at: usize, chars: usize) -> String {
    use unicode_segmentation::UnicodeSegmentation;
    let before: Vec<usize> = text[..at].grapheme_indices(true).map(|(i, _)| i).collect();
    let start = before
        .len()
        .checked_sub(chars / 2)
        .map_or(0, |k| before.get(k).copied().unwrap_or(0));
    let remaining = chars.saturating_sub(before.len().min(chars / 2));
    let end = text[at..]
        .grapheme_indices(true)
        .nth(remaining)
        .map_or(text.len(), |(i, _)| at + i);
    let mut s = memloop_text::one_line(&text[start..end]);
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
    /// Messages of past sessions containing every term of `query`, newest session first, within
    /// `options`' bounds. Terms are compared as recall compares them (Unicode-normalised, case
    /// folded, stemmed, CJK as character bigrams), so the search works in every language. An
    /// empty query finds nothing. Snippets are redacted ([`memloop_secrets::redact_secrets`]),
    /// whatever the file on disk holds.
    pub fn search(
        &self,
        query: &str,
        options: &SearchOptions,
    ) -> Result<Vec<SearchHit>, MemoryError> {
        let query = Query::new(query);
        let mut hits = Vec::new();
        if query.is_empty() || options.limit == 0 {
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
            let transcript = crate::file::Transcript::parse(&text, &s.path);
            for r in transcript.message_records() {
                if let Some(hit) = match_record(r, &s.id, &query, options.snippet_chars) {
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
    query: &Query,
    snippet_chars: usize,
) -> Option<SearchHit> {
    let text = r.text();
    if !query.matches(&text) {
        return None;
    }
    // What the search returns never holds a credential the user once pasted: the snippet is cut
    // from the redacted text, and a message found only by its credential is not a hit.
    let (text, redacted) = memloop_secrets::redact_secrets(&text);
    if redacted > 0 && !query.matches(&text) {
        return None;
    }
    // Place the snippet at the first query word found in the normalised text. When normalising
    // kept every character's byte length (ASCII case, most accents) offsets agree and the text
    // is shown as written; otherwise the normalised text is shown.
    let normalised = normalize(&text);
    let same_offsets = text
        .chars()
        .map(char::len_utf8)
        .eq(normalised.chars().map(char::len_utf8));
    let shown: &str = if same_offsets { &text } else { &normalised };
    let at = query
        .words
        .iter()
        .filter_map(|w| normalised.find(w.as_str()))
        .min()
        .or_else(|| {
            // Met only with accents folded (`zurich` in `Zürich`): find it in the folded text.
            let (folded, from) = fold_with_offsets(&normalised);
            query
                .words
                .iter()
                .filter_map(|w| folded.find(fold_with_offsets(w).0.as_str()))
                .min()
                .and_then(|p| from.get(p).copied())
        })
        .unwrap_or(0);
    Some(SearchHit {
        session_id: session.to_owned(),
        timestamp: r.timestamp.clone(),
        role: match r.kind {
            crate::file::RecordKind::Assistant => "assistant",
            _ => "user",
        }
        .to_owned(),
        snippet: snippet(shown, at, snippet_chars.max(20)),
    })
}

#[cfg(test)]
mod tests {
    use super::snippet;

    #[test]
    fn snippets_are_cut_between_grapheme_clusters() {
        // Hindi: every cut of a snippet lands between clusters, never inside "क्षे" or "स्ते".
        let hindi = "नमस्ते। सर्वर क्षेत्र की सेटिंग्स बदल दी गईं, डेटाबेस अब पोर्ट 5433 पर है।";
        let at = hindi.find("डेटाबेस").unwrap_or(0);
        for chars in 20..40 {
            let s = snippet(hindi, at, chars);
            let body = s.trim_start_matches('…').trim_end_matches('…');
            assert!(hindi.contains(body), "{chars}: {s}");
            let first = body.chars().next().unwrap_or(' ');
            let last = body.chars().last().unwrap_or(' ');
            // A cluster never starts with a combining mark nor ends with a virama.
            assert!(!('\u{93e}'..='\u{94d}').contains(&first), "{chars}: {s}");
            assert_ne!(last, '\u{94d}', "{chars}: {s}");
        }
        // An emoji family is kept whole at either end.
        let family = "👨\u{200d}👩\u{200d}👧\u{200d}👦";
        let text = format!("{family}{family} trip planned for Kyoto {family}{family}");
        let at = text.find("Kyoto").unwrap_or(0);
        for chars in 20..30 {
            let s = snippet(&text, at, chars);
            let body = s.trim_start_matches('…').trim_end_matches('…');
            assert!(
                !body.starts_with('\u{200d}') && !body.ends_with('\u{200d}'),
                "{s}"
            );
            assert_eq!(body.matches('\u{200d}').count() % 3, 0, "{s}");
        }
    }
}
