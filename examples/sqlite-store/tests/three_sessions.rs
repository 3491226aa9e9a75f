//! Three sessions of an agent whose four memory parts are this crate's: the SQLite store, the
//! keyword selector, the fact extractor and the session notes in the database, given to
//! `MemorySetup`. memloop's `ScriptedModel` stands in for the LLM (deterministic answers, and a
//! record of every request it was sent).
//!
//! 1. A fact the user states is saved (by the extractor, with no model call) as a row of the
//!    database file.
//! 2. A new agent over the same file, as a new process would open it, is asked about it: the
//!    selector picks it and recall puts it into the request the model receives.
//! 3. A long session passes the (lowered) auto-compaction threshold and is compacted with its
//!    session notes: the compacted history holds the notes kept in the database.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns unwrap too

use memloop::compact::CompactConfig;
use memloop::core::events::{AgentEvent, EventSink, VecSink};
use memloop::core::message::MessageKind;
use memloop::core::model::ModelRequest;
use memloop::core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop::core::{Agent, AgentConfig};
use memloop::host::env::EnvVars;
use memloop::memory::MemoryEvent;
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::recall::RecallEvent;
use memloop::memory::session_notes::UpdateThresholds;
use memloop::memory::transcripts::TranscriptConfig;
use memloop::testkit::{ScriptStep, ScriptedModel};
use memloop::{MemorySetup, MemoryStore, SessionMemory, async_trait};
use memloop_sqlite_store::{FactExtractor, KeywordSelector, SqliteMemoryStore, SqliteSessionNotes};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// One session, as a new process would start it: a new handle on the database file, a new
/// `MemorySetup` with the four parts of this crate, notes for this session's id.
struct Session {
    memory: MemorySetup,
    config: AgentConfig,
    notes: SqliteSessionNotes,
}

async fn session(home: &Path, project: &Path, db: &Path, thresholds: UpdateThresholds) -> Session {
    let store = SqliteMemoryStore::open(db).unwrap();
    let config = AgentConfig {
        cwd: project.to_path_buf(),
        ..AgentConfig::default()
    };
    let notes = SqliteSessionNotes::open(&store, &config.session_id, thresholds)
        .await
        .unwrap();
    let shared: Arc<dyn MemoryStore> = Arc::new(store);
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project), env)
        .unwrap()
        .memory_store(shared.clone())
        .selector(Arc::new(KeywordSelector::new()))
        .extractor(Arc::new(FactExtractor::new(shared)))
        .session_memory(Arc::new(notes.clone()))
        // The database keeps no transcripts, and the dream would keep its lock under the
        // process's HOME: both off, so the test writes only to its temp dirs.
        .transcripts(TranscriptConfig {
            enabled: false,
            ..TranscriptConfig::default()
        })
        .dream(false);
    Session {
        memory,
        config,
        notes,
    }
}

/// Returns once recall has surfaced something (recall never delays a turn; a scripted model
/// answers at once).
struct AfterRecall(Arc<Notify>);

#[async_trait]
impl Tool for AfterRecall {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "after_recall".into(),
            description: "Waits for recall.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
            effect: ToolEffect::ReadOnly,
        }
    }
    async fn call(&self, _input: Value, _ctx: &ToolContext) -> ToolOutput {
        match tokio::time::timeout(Duration::from_secs(30), self.0.notified()).await {
            Ok(()) => ToolOutput::ok("recalled"),
            Err(_) => ToolOutput::error("recall surfaced nothing within 30 s"),
        }
    }
}

fn after_tool_result(req: &ModelRequest) -> bool {
    req.messages
        .last()
        .is_some_and(|m| m.tool_result_ids().next().is_some())
}

/// The memories in the database file, read with SQLite itself: `(rel_path, body)`.
fn rows(db: &Path) -> Vec<(String, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT rel_path, body FROM memories ORDER BY rel_path")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The session notes row of `session`, read with SQLite itself.
fn notes_row(db: &Path, session: &str) -> Option<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT content FROM session_notes WHERE session_id = ?1",
        [session],
        |r| r.get(0),
    )
    .ok()
}

/// What one long-session turn says: about 100 tokens, numbered, no fact for the extractor.
fn long_turn(i: usize) -> String {
    format!(
        "Turn {i}: please look at the payment service checklist item {i}. {}",
        "It covers the retry budget, the timeout ladder and the queue depth alarms. ".repeat(4)
    )
}

// One thread: recall emits its event and hands over its memories in one poll, so the tool that
// waits for the event returns only once the memories are attached.
#[tokio::test]
async fn a_fact_is_saved_then_recalled_in_a_new_session_and_a_long_session_compacts_with_its_notes()
{
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("memory.sqlite3");
    let quiet = UpdateThresholds::default();

    // Session 1: the user states a fact; the extractor saves it into SQLite after the turn.
    let s1 = session(home.path(), project.path(), &db, quiet).await;
    let model = ScriptedModel::new().on_purpose("main", |_| Some(ScriptStep::text("Noted.")));
    let events = VecSink::default();
    let builder = Agent::builder(Arc::new(model.clone()))
        .config(s1.config.clone())
        .events(Arc::new(events.clone()));
    let mut agent = s1.memory.attach(builder).unwrap().build();
    agent
        .run_turn("Hi! Remember: the staging database is called kestrel-db. Thanks.")
        .await
        .unwrap();
    assert!(agent.drain(Duration::from_secs(60)).await.completed);
    let saved = rows(&db);
    assert_eq!(saved.len(), 1, "{saved:?}");
    let (rel, body) = &saved[0];
    assert_eq!(body.trim(), "the staging database is called kestrel-db.");
    let saved_events: Vec<Vec<String>> = events
        .events()
        .iter()
        .filter_map(|e| match e.extension() {
            Some(MemoryEvent::MemoriesSaved { paths }) => Some(paths.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(saved_events, [vec![rel.clone()]]);
    // The extractor asked no model: the one request is the turn's own.
    assert_eq!(model.requests().len(), 1);
    drop(agent);

    // Session 2: a new agent over the same file asks; the selector picks the memory and recall
    // puts it into the request the model receives.
    let s2 = session(home.path(), project.path(), &db, quiet).await;
    let recalled = Arc::new(Notify::new());
    let signal = recalled.clone();
    let events = VecSink::default();
    let sink = events.clone();
    let on_event = move |e: AgentEvent| {
        if matches!(e.extension(), Some(RecallEvent::MemoriesSurfaced { .. })) {
            signal.notify_one();
        }
        sink.emit(e);
    };
    let model = ScriptedModel::new().on_purpose("main", |req| {
        Some(if after_tool_result(req) {
            ScriptStep::text("It is kestrel-db.")
        } else {
            ScriptStep::tool("after_recall", json!({}))
        })
    });
    let builder = Agent::builder(Arc::new(model.clone()))
        .config(s2.config.clone())
        .tool(Arc::new(AfterRecall(recalled)))
        .events(Arc::new(on_event));
    let mut agent = s2.memory.attach(builder).unwrap().build();
    let out = agent
        .run_turn("Which database does our staging environment use?")
        .await
        .unwrap();
    assert_eq!(out.text, "It is kestrel-db.");
    let surfaced: Vec<Vec<String>> = events
        .events()
        .iter()
        .filter_map(|e| match e.extension() {
            Some(RecallEvent::MemoriesSurfaced { paths, .. }) => Some(paths.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(surfaced, [vec![rel.clone()]]);
    let last = model.requests_for("main").pop().unwrap();
    let seen: String = last.messages.iter().map(|m| m.text()).collect();
    assert!(
        seen.contains("the staging database is called kestrel-db."),
        "{seen}"
    );
    assert!(agent.drain(Duration::from_secs(60)).await.completed);
    drop(agent);

    // Session 3: a long session. A 6,000-token window (auto-compaction at 2,500 tokens) and
    // notes updated from 500 tokens on; the notes replace what they cover.
    let eager = UpdateThresholds {
        init_tokens: 500,
        min_tokens_between_updates: 200,
        tool_calls_between_updates: 3,
    };
    let s3 = session(home.path(), project.path(), &db, eager).await;
    let mut compact = CompactConfig::for_model(6_000, 1_000);
    compact.session_memory.min_tokens = 200;
    compact.session_memory.min_text_messages = 2;
    compact.session_memory.max_tokens = 1_000;
    let notes_config = s3.memory.default_notes_config().unwrap();
    let memory = s3.memory.clone().compaction(compact, notes_config);
    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("Checked, all in order.")))
        .on_purpose("compact_summary", |_| {
            Some(ScriptStep::text("An LLM summary, not the notes."))
        });
    let events = VecSink::default();
    let builder = Agent::builder(Arc::new(model.clone()))
        .config(s3.config.clone())
        .events(Arc::new(events.clone()));
    let mut agent = memory.attach(builder).unwrap().build();
    let turns = 30;
    for i in 1..=turns {
        agent.run_turn(long_turn(i)).await.unwrap();
        assert!(agent.drain(Duration::from_secs(60)).await.completed);
    }

    let compactions: Vec<String> = events
        .events()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Compacted { strategy, .. } => Some(strategy.to_string()),
            _ => None,
        })
        .collect();
    assert!(!compactions.is_empty(), "the long session was compacted");
    assert!(
        compactions.iter().all(|s| s == "session_memory"),
        "{compactions:?}"
    );
    assert!(model.requests_for("compact_summary").is_empty());

    // The notes are in the database, keyed by the session, and cover the first turn.
    let notes = notes_row(&db, s3.notes.session_id()).expect("a notes row for session 3");
    let first = "- Turn 1: please look at the payment service checklist item 1.";
    assert!(notes.contains(first), "{notes}");
    // The compacted history: the first turn is gone, and the summary in its place holds the
    // notes' lines (the newest compaction used the notes as they were then).
    let history = agent.messages();
    assert!(
        !history
            .iter()
            .any(|m| m.meta.kind == MessageKind::Normal && m.text().starts_with("Turn 1:")),
        "the first turn was compacted away"
    );
    let summary = history
        .iter()
        .find(|m| m.meta.kind == MessageKind::CompactSummary)
        .expect("a compaction summary in the history");
    let summary_text = summary.text();
    assert!(summary_text.contains(first), "{summary_text}");
    assert!(
        summary_text.contains("What the user said in this session"),
        "{summary_text}"
    );
    assert!(!summary_text.contains("An LLM summary"), "{summary_text}");
    let summarized: Vec<&str> = summary_text
        .lines()
        .filter(|l| l.starts_with("- Turn "))
        .collect();
    assert!(summarized.len() > 1, "{summary_text}");
    for line in &summarized {
        assert!(notes.contains(line), "{line} is not in the notes row");
    }
    // The notes kept growing after the compaction (by more than the one update a stale baseline
    // would still allow): their baselines were reset to the compacted size.
    let noted = notes.lines().filter(|l| l.starts_with("- Turn ")).count();
    assert!(noted > summarized.len() + 1, "{noted} lines: {notes}");
    // What the model was sent after the compaction starts from those notes.
    let last = model.requests_for("main").pop().unwrap();
    let sent: String = last.messages.iter().map(|m| m.text()).collect();
    assert!(sent.contains(first), "{sent}");
    assert_eq!(
        s3.notes.current_notes().await.unwrap(),
        Some(notes.clone()),
        "the trait reads the same row"
    );
}
