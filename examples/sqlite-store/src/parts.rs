//! The example's own recall selector, extractor and session notes. With
//! [`SqliteMemoryStore`] they are the four parts a host can give
//! [`MemorySetup`](memloop::MemorySetup) instead of memloop's defaults:
//!
//! - [`KeywordSelector`] ([`Selector`]): ranks memories by how many words of the query their
//!   name and description share;
//! - [`FactExtractor`] ([`Extractor`]): saves the durable facts the user states (a sentence that
//!   starts with `Remember:`, or says `always` or `never`) through the store it is given, with no
//!   model call;
//! - [`SqliteSessionNotes`] ([`SessionMemory`]): session notes in the memory database itself
//!   (table `session_notes`, one row per session), a digest of what the user said, which
//!   compaction uses as its summary.
//!
//! They are deterministic on purpose: they show what each trait asks for, not how an LLM would
//! fill it. memloop's defaults (BM25 or hybrid recall, the forked extractor, notes an LLM keeps
//! in a file) are the parts to compare them with.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop::core::{Agent};
//! use memloop::testkit::ScriptedModel;
//! use memloop::host::env::EnvVars;
//! use memloop::memory::{paths::MemoryDirResolver, session_notes::UpdateThresholds};
//! use memloop::memory::transcripts::TranscriptConfig;
//! use memloop::{MemorySetup, MemoryStore};
//! use memloop_sqlite_store::{FactExtractor, KeywordSelector, SqliteMemoryStore, SqliteSessionNotes};
//! use std::sync::Arc;
//!
//! let dir = tempfile::tempdir()?;
//! let store = SqliteMemoryStore::open(dir.path().join("memory.sqlite3"))?;
//! let agent = Agent::builder(Arc::new(ScriptedModel::new())); // your model
//! let notes = SqliteSessionNotes::open(&store, agent.session_id(), UpdateThresholds::default()).await?;
//! let shared: Arc<dyn MemoryStore> = Arc::new(store);
//! // `MemorySetup::for_project(project)` in an application; here a home of its own.
//! let home = dir.path().to_str().ok_or("a non-UTF-8 temp dir")?;
//! let env = EnvVars::from_pairs([("MEMLOOP_HOME", home)]);
//! let memory = MemorySetup::with_resolver(MemoryDirResolver::new(dir.path()), env)?
//!     .memory_store(shared.clone())
//!     .selector(Arc::new(KeywordSelector::new()))
//!     .extractor(Arc::new(FactExtractor::new(shared)))
//!     .session_memory(Arc::new(notes))
//!     // Transcripts need a directory the database does not give; no dream in this example.
//!     .transcripts(TranscriptConfig { enabled: false, ..TranscriptConfig::default() })
//!     .dream(false);
//! assert!(memory.memory_dir().is_none(), "the memories live in the database");
//! let _agent = memory.attach(agent)?.build();
//! # Ok(()) }
//! ```

use crate::SqliteMemoryStore;
use crate::store::{nanos_since_epoch, sqlite};
use memloop::core::HookContext;
use memloop::core::message::{Message, MessageId, MessageKind, Role};
use memloop::memory::extract::{ExtractError, ExtractionContext};
use memloop::memory::recall::{SelectionContext, SelectorError};
use memloop::memory::session_notes::{
    Baselines, CompactionNotes, SessionMemoryError, UpdateFuture, UpdateReport, UpdateSignal,
    UpdateThresholds, UpdateTrigger,
};
use memloop::memory::store::{
    MemoryDoc, MemoryError, MemoryHeader, MemoryPath, MemoryType, WriteMode, title_file_stem,
    topic_to_rel_path,
};
use memloop::text::{Analyzer, Language};
use memloop::{Extractor, MemoryStore, Selector, SessionMemory, async_trait};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::time::Instant;

/// How a text the harness put into a user message starts (recall's memories, notices): not
/// something the user said.
const REMINDER_PREFIX: &str = "<system-reminder>";

/// What the user typed in `message`: the text blocks of an ordinary user message, without tool
/// results and without the reminders the harness appends (recalled memories, notices). Empty for
/// every other message (assistant turns, compaction markers and summaries).
fn said_by_user(message: &Message) -> Vec<&str> {
    if message.role != Role::User || message.meta.kind != MessageKind::Normal {
        return Vec::new();
    }
    message
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .map(str::trim)
        .filter(|text| !text.is_empty() && !text.starts_with(REMINDER_PREFIX))
        .collect()
}

/// `text` with every run of whitespace made one space, cut to at most `max` characters (an
/// ellipsis marks a cut).
fn one_line(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", line[..cut].trim_end()),
        None => line,
    }
}

// ---------------------------------------------------------------------------------------------
// Selector
// ---------------------------------------------------------------------------------------------

/// Recall by keyword overlap: a memory scores one point per distinct word of the query that its
/// name or description contains, words compared as memloop's analyzer makes them (case-folded,
/// stop words dropped, English stems, so `deploys` meets `deploy`). Memories that share no word
/// are never selected; ties go to the newer memory; at most `ctx.limit` paths are returned, none
/// of them already surfaced this session.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop::Selector;
/// use memloop::memory::recall::SelectionContext;
/// use memloop::memory::store::MemoryHeader;
/// use memloop_sqlite_store::KeywordSelector;
///
/// let header = |path: &str, description: &str| MemoryHeader {
///     rel_path: path.into(), name: None, description: Some(description.into()),
///     memory_type: None, mtime: std::time::SystemTime::UNIX_EPOCH,
/// };
/// let headers = [header("db.md", "the staging database is kestrel"), header("ui.md", "colours")];
/// let got = KeywordSelector::new()
///     .select("which database does staging use?", &headers, &SelectionContext::default())
///     .await
///     .unwrap();
/// assert_eq!(got, ["db.md"]);
/// # }
/// ```
pub struct KeywordSelector {
    analyzer: Analyzer,
}

impl std::fmt::Debug for KeywordSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeywordSelector").finish_non_exhaustive()
    }
}

impl Default for KeywordSelector {
    fn default() -> Self {
        Self::new()
    }
}

impl KeywordSelector {
    /// A selector comparing English words.
    pub fn new() -> Self {
        Self {
            analyzer: Analyzer::new(false).with_language(Some(Language::English)),
        }
    }

    fn words(&self, text: &str) -> HashSet<String> {
        self.analyzer.unigrams(text).into_iter().collect()
    }
}

#[async_trait]
impl Selector for KeywordSelector {
    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        let wanted = self.words(query);
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let mut scored: Vec<(usize, &str)> = headers
            .iter()
            .filter(|h| !ctx.already_surfaced.contains(&h.rel_path))
            .filter_map(|h| {
                let text = format!(
                    "{} {}",
                    h.name.as_deref().unwrap_or_default(),
                    h.description.as_deref().unwrap_or_default()
                );
                let score = self.words(&text).intersection(&wanted).count();
                (score > 0).then_some((score, h.rel_path.as_str()))
            })
            .collect();
        // Stable: among equal scores the headers' order (newest first) stays.
        scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
        Ok(scored
            .into_iter()
            .take(ctx.limit)
            .map(|(_, path)| path.to_owned())
            .collect())
    }

    fn name(&self) -> &'static str {
        "keyword-overlap"
    }
}

// ---------------------------------------------------------------------------------------------
// Extractor
// ---------------------------------------------------------------------------------------------

/// Longest memory name the extractor makes from a fact (the description holds the fact).
const MAX_NAME_CHARS: usize = 60;
/// Longest fact the extractor keeps in a description.
const MAX_DESCRIPTION_CHARS: usize = 200;

/// A durable fact found in what the user said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fact {
    text: String,
    memory_type: MemoryType,
}

/// The sentences of `text`: ended by `.`, `!` or `?` before whitespace (or at the end), or by a
/// line break; trimmed, empty ones dropped.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next_is_space = chars.peek().is_none_or(|(_, n)| n.is_whitespace());
        if c == '\n' || (matches!(c, '.' | '!' | '?') && next_is_space) {
            out.push(&text[start..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    out.push(&text[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The durable facts of `text`: a sentence starting `Remember:` (its rest, a project fact), or a
/// sentence with the word `always` or `never` (feedback: how the user wants things done). Words
/// are compared ASCII case-insensitively.
fn facts(text: &str) -> Vec<Fact> {
    const REMEMBER: &str = "remember:";
    let mut out = Vec::new();
    for sentence in sentences(text) {
        let remembered = sentence
            .get(..REMEMBER.len())
            .filter(|head| head.eq_ignore_ascii_case(REMEMBER))
            .map(|_| sentence[REMEMBER.len()..].trim());
        let fact = match remembered {
            Some(rest) if !rest.is_empty() => Fact {
                text: rest.to_owned(),
                memory_type: MemoryType::Project,
            },
            Some(_) => continue,
            None if sentence
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w.eq_ignore_ascii_case("always") || w.eq_ignore_ascii_case("never")) =>
            {
                Fact {
                    text: sentence.to_owned(),
                    memory_type: MemoryType::Feedback,
                }
            }
            None => continue,
        };
        if !out.contains(&fact) {
            out.push(fact);
        }
    }
    out
}

/// Saves the durable facts the user states, with no model call: each sentence of a new user
/// message that starts with `Remember:` becomes a project memory, each one that says `always` or
/// `never` a feedback memory. A memory is named after its fact (the same fact is the same
/// memory, overwritten, never duplicated) and written through the store the extractor is given,
/// so memloop's write rules (paths, size, credentials) apply. Recalled memories and other text
/// the harness adds to a user message are not read.
pub struct FactExtractor {
    store: Arc<dyn MemoryStore>,
}

impl std::fmt::Debug for FactExtractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FactExtractor")
            .field("store", &self.store.describe().to_string())
            .finish()
    }
}

impl FactExtractor {
    /// An extractor writing to `store` (give it the store the setup uses).
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl Extractor for FactExtractor {
    async fn extract(&self, ctx: &ExtractionContext) -> Result<Vec<MemoryPath>, ExtractError> {
        let mut saved = Vec::new();
        for message in &ctx.new_messages {
            for text in said_by_user(message) {
                for fact in facts(text) {
                    let stem = title_file_stem(&fact.text, "fact");
                    let rel = topic_to_rel_path(&stem)?;
                    let doc = MemoryDoc::new(
                        one_line(&fact.text, MAX_NAME_CHARS),
                        one_line(&fact.text, MAX_DESCRIPTION_CHARS),
                        fact.memory_type,
                        &fact.text,
                    );
                    let report = self.store.write(&rel, &doc, WriteMode::Overwrite).await?;
                    // The memory path (`fact_….md`): a database row has no file to name.
                    saved.push(MemoryPath::new(&report.rel_path)?);
                }
            }
        }
        Ok(saved)
    }
}

// ---------------------------------------------------------------------------------------------
// Session memory
// ---------------------------------------------------------------------------------------------

/// The notes table, created when notes are opened (idempotent).
const NOTES_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS session_notes (
    session_id TEXT PRIMARY KEY,
    content    TEXT NOT NULL,
    updated_at INTEGER NOT NULL -- nanoseconds since the Unix epoch
);
";

/// The first lines of every session's notes; one `- ` line per user message follows.
const NOTES_HEADER: &str =
    "# Session notes\n\nWhat the user said in this session, one line per message, oldest first:\n";

/// Longest line the notes keep for one user message.
const MAX_LINE_CHARS: usize = 160;

/// The notes' bookkeeping in this process.
#[derive(Default)]
struct NotesState {
    /// What the threshold rule compares against.
    baselines: Baselines,
    /// The ticket the next update takes.
    next_ticket: u64,
    /// The newest ticket whose snapshot `baselines.last_summarized` holds (an older update that
    /// finishes late does not move it back).
    summarized_ticket: Option<u64>,
    /// Updates queued or running: ticket → since when.
    in_flight: BTreeMap<u64, Instant>,
}

struct NotesInner {
    store: SqliteMemoryStore,
    session_id: String,
    thresholds: UpdateThresholds,
    state: Mutex<NotesState>,
}

impl NotesInner {
    fn state(&self) -> std::sync::MutexGuard<'_, NotesState> {
        // The state is plain data, valid after any panic: take it back from a poisoned lock.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn notes_path(&self) -> PathBuf {
        PathBuf::from(format!(
            "{}#session_notes/{}",
            self.store.path().display(),
            self.session_id
        ))
    }

    fn error(&self, e: MemoryError) -> SessionMemoryError {
        SessionMemoryError::Io {
            path: self.store.path().to_path_buf(),
            source: std::io::Error::other(e),
        }
    }

    /// Add the `lines` the notes lack, in one `IMMEDIATE` transaction (so concurrent updates,
    /// from this process or another, each see the other's lines). Returns how many were added.
    async fn append(&self, lines: Vec<String>) -> Result<u32, SessionMemoryError> {
        let session = self.session_id.clone();
        self.store
            .blocking(move |conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(sqlite)?;
                let old: Option<String> = tx
                    .query_row(
                        "SELECT content FROM session_notes WHERE session_id = ?1",
                        [&session],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sqlite)?;
                let mut content = old.unwrap_or_else(|| NOTES_HEADER.to_owned());
                let known: HashSet<String> = content
                    .lines()
                    .filter_map(|l| l.strip_prefix("- "))
                    .map(str::to_owned)
                    .collect();
                let mut added = 0u32;
                for line in lines.iter().filter(|l| !known.contains(*l)) {
                    content.push_str("- ");
                    content.push_str(line);
                    content.push('\n');
                    added += 1;
                }
                if added > 0 {
                    let now = nanos_since_epoch(SystemTime::now());
                    tx.execute(
                        "INSERT INTO session_notes (session_id, content, updated_at)
                         VALUES (?1, ?2, ?3)
                         ON CONFLICT (session_id) DO UPDATE SET
                             content = excluded.content, updated_at = excluded.updated_at",
                        params![session, content, now],
                    )
                    .map_err(sqlite)?;
                }
                tx.commit().map_err(sqlite)?;
                Ok(added)
            })
            .await
            .map_err(|e| self.error(e))
    }
}

/// An update in flight: leaves the in-flight set when dropped (finished, failed or abandoned).
struct InFlight {
    inner: Arc<NotesInner>,
    ticket: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.inner.state().in_flight.remove(&self.ticket);
    }
}

/// Session notes in the memory database: table `session_notes`, one row per session id, next
/// to the memories in the same SQLite file (sharing [`SqliteMemoryStore`]'s connection). The
/// notes are a digest of the conversation, not an LLM's summary: one line per user message
/// (whitespace collapsed, at most 160 characters), oldest first, each line once. Compaction
/// ([`notes_for_compaction`](SessionMemory::notes_for_compaction)) puts them in place of the
/// messages they cover.
///
/// An update is due by memloop's threshold rule ([`UpdateThresholds`], the same numbers the
/// file notes use); it reads the conversation when it is queued and adds the lines the notes
/// lack in one transaction, so updates that overlap (or run in several processes) lose nothing.
///
/// There is no notes file: [`notes_path`](SessionMemory::notes_path) (which the trait calls the
/// notes file) is the database file with the fragment `#session_notes/<session id>`, naming
/// the row. The summary shows it where it cuts the notes short; memloop's `edit_session_notes`
/// tool, which `MemorySetup` declares over that path for its own LLM updater, is never called by
/// these notes' updates and refuses every other caller.
#[derive(Clone)]
pub struct SqliteSessionNotes {
    inner: Arc<NotesInner>,
}

impl std::fmt::Debug for SqliteSessionNotes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteSessionNotes")
            .field("notes", &self.inner.notes_path())
            .finish_non_exhaustive()
    }
}

impl SqliteSessionNotes {
    /// The notes of session `session_id` in `store`'s database (the table is created if
    /// missing), updated when `thresholds` say so. Give the id of the agent's session
    /// (`AgentConfig::session_id`): a new process resuming that session finds its notes.
    pub async fn open(
        store: &SqliteMemoryStore,
        session_id: &str,
        thresholds: UpdateThresholds,
    ) -> Result<Self, SessionMemoryError> {
        if session_id.trim().is_empty() {
            return Err(SessionMemoryError::InvalidSessionId(session_id.to_owned()));
        }
        let inner = Arc::new(NotesInner {
            store: store.clone(),
            session_id: session_id.to_owned(),
            thresholds,
            state: Mutex::default(),
        });
        store
            .blocking(|conn| conn.execute_batch(NOTES_SCHEMA).map_err(sqlite))
            .await
            .map_err(|e| inner.error(e))?;
        Ok(Self { inner })
    }

    /// The session these notes belong to.
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }
}

/// The notes lines of `messages`: one per user message, in order.
fn user_lines(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| one_line(&said_by_user(m).join(" "), MAX_LINE_CHARS))
        .filter(|line| !line.is_empty())
        .collect()
}

#[async_trait]
impl SessionMemory for SqliteSessionNotes {
    fn is_enabled(&self) -> bool {
        true
    }

    fn notes_path(&self) -> PathBuf {
        self.inner.notes_path()
    }

    async fn current_notes(&self) -> Result<Option<String>, SessionMemoryError> {
        let session = self.inner.session_id.clone();
        self.inner
            .store
            .blocking(move |conn| {
                conn.query_row(
                    "SELECT content FROM session_notes WHERE session_id = ?1",
                    [&session],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sqlite)
            })
            .await
            .map_err(|e| self.inner.error(e))
    }

    fn should_update(&self, ctx: &HookContext) -> bool {
        if !ctx.is_main() {
            return false;
        }
        let state = self.inner.state();
        let messages = ctx.messages.as_slice();
        let after = state
            .baselines
            .update_marker
            .as_ref()
            .and_then(|id| messages.iter().position(|m| &m.id == id))
            .map_or(0, |i| i + 1);
        let signal = UpdateSignal {
            context_tokens: ctx.context_tokens,
            tool_calls_since_update: messages[after..]
                .iter()
                .map(|m| m.tool_uses().count())
                .sum(),
            last_turn_without_tools: messages
                .iter()
                .rev()
                .find(|m| m.role == Role::Assistant)
                .is_some_and(|m| !m.has_tool_use()),
        };
        self.inner.thresholds.is_due(&state.baselines, signal)
    }

    /// An automatic and a manual update do the same (the thresholds are the caller's check).
    fn update(&self, ctx: &HookContext, _trigger: UpdateTrigger) -> UpdateFuture {
        let snapshot = ctx.messages.last().map(|m| m.id.clone());
        // The conversation is read now: the update covers what was said when it was asked for.
        let lines = user_lines(&ctx.messages);
        let ticket = {
            let mut state = self.inner.state();
            state.baselines.initialized = true;
            state.baselines.tokens_at_last_update = ctx.context_tokens;
            state.baselines.update_marker = snapshot.clone();
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            state.in_flight.insert(ticket, Instant::now());
            ticket
        };
        let in_flight = InFlight {
            inner: self.inner.clone(),
            ticket,
        };
        Box::pin(async move {
            let inner = in_flight.inner.clone();
            let added = inner.append(lines).await?;
            {
                let mut state = inner.state();
                if state.summarized_ticket.is_none_or(|t| t < ticket) {
                    state.summarized_ticket = Some(ticket);
                    state.baselines.last_summarized = snapshot.clone();
                }
            }
            drop(in_flight);
            Ok(UpdateReport {
                path: inner.notes_path(),
                edits: added,
                refused: 0,
                last_summarized: snapshot,
            })
        })
    }

    fn update_in_flight_since(&self) -> Option<Instant> {
        self.inner.state().in_flight.values().min().copied()
    }

    async fn notes_for_compaction(&self) -> Result<Option<CompactionNotes>, SessionMemoryError> {
        let Some(content) = self.current_notes().await? else {
            return Ok(None);
        };
        let state = self.inner.state();
        Ok(Some(CompactionNotes {
            // A row is written only with at least one line: never the bare header.
            is_template: content.trim() == NOTES_HEADER.trim(),
            content,
            path: self.inner.notes_path(),
            last_summarized: state.baselines.last_summarized.clone(),
            update_in_flight_since: state.in_flight.values().min().copied(),
        }))
    }

    fn reset_baselines(&self, context_tokens: u64, summarized: Option<MessageId>) {
        let mut state = self.inner.state();
        state.baselines.tokens_at_last_update = context_tokens;
        state.baselines.update_marker = summarized.clone();
        state.baselines.last_summarized = summarized;
        // Updates queued before the compaction saw messages that are gone now: when they
        // finish they must not point the notes at them.
        state.summarized_ticket = state.next_ticket.checked_sub(1);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn header(path: &str, name: &str, description: &str) -> MemoryHeader {
        MemoryHeader {
            rel_path: path.into(),
            name: Some(name.into()),
            description: Some(description.into()),
            memory_type: None,
            mtime: SystemTime::UNIX_EPOCH,
        }
    }

    #[tokio::test]
    async fn the_selector_ranks_by_shared_words_within_the_limit() {
        // Newest first, as a store scans them.
        let headers = [
            header("one.md", "Deploys", "who approves a deploy"),
            header("none.md", "Colours", "the palette of the dashboard"),
            header("two.md", "Deploy days", "we deploy on Tuesdays"),
            header(
                "three.md",
                "Staging deploys",
                "deploy staging Tuesdays freeze",
            ),
            header("older_one.md", "Tuesdays", "the team meets on Tuesdays"),
        ];
        let selector = KeywordSelector::new();
        let query = "Can we DEPLOY to staging on Tuesdays?";
        let mut ctx = SelectionContext::with_limit(3);
        let got = selector.select(query, &headers, &ctx).await.unwrap();
        // Three shared words, then two, then one (the newer of the two with one).
        assert_eq!(got, ["three.md", "two.md", "one.md"]);
        ctx.already_surfaced.insert("three.md".into());
        ctx.limit = 5;
        let got = selector.select(query, &headers, &ctx).await.unwrap();
        assert_eq!(got, ["two.md", "one.md", "older_one.md"]);
        let nothing = selector.select("the", &headers, &ctx).await.unwrap();
        assert!(nothing.is_empty(), "{nothing:?}");
    }

    #[test]
    fn sentences_end_at_stops_and_line_breaks() {
        assert_eq!(
            sentences("We use v1.2 now. Really? Yes!\nnext line"),
            ["We use v1.2 now.", "Really?", "Yes!", "next line"]
        );
    }

    #[test]
    fn facts_are_remember_sentences_and_always_or_never_rules() {
        let got = facts(
            "Hi there. Remember: the staging database is kestrel. We ALWAYS squash merges. \
             Nevertheless this is chatter. remember:   ",
        );
        assert_eq!(
            got,
            [
                Fact {
                    text: "the staging database is kestrel.".into(),
                    memory_type: MemoryType::Project,
                },
                Fact {
                    text: "We ALWAYS squash merges.".into(),
                    memory_type: MemoryType::Feedback,
                },
            ]
        );
    }

    #[test]
    fn reminders_summaries_and_assistant_turns_are_not_what_the_user_said() {
        let mut m = Message::user("Remember: tabs.");
        m.content.push(memloop::core::message::ContentBlock::text(
            "<system-reminder>\nRemember: spaces.\n</system-reminder>",
        ));
        assert_eq!(said_by_user(&m), ["Remember: tabs."]);
        let summary = Message::user("Remember: old").with_kind(MessageKind::CompactSummary);
        assert!(said_by_user(&summary).is_empty());
        assert!(said_by_user(&Message::assistant("Remember: x")).is_empty());
    }

    #[test]
    fn a_long_line_is_cut_with_a_mark() {
        assert_eq!(one_line("a  b\n c", 10), "a b c");
        assert_eq!(one_line("abcdef ghij", 7), "abcdef…");
    }
}
