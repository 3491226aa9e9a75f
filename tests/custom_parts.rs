//! `MemorySetup` over parts the host gives: its own `MemoryStore` (here a map in memory, no
//! directory at all), its own `Extractor` and its own `SessionMemory`. Every part `attach` wires
//! works over them, and a part that needs what the store lacks is a `SetupError` naming it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns unwrap too

use memloop::core::{Agent, HookContext, message::MessageId, model::ModelRequest};
use memloop::host::env::EnvVars;
use memloop::memory::extract::{ExtractError, ExtractionContext};
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::session_notes::{
    CompactionNotes, FileSessionNotes, SessionMemoryError, UpdateFuture, UpdateTrigger,
};
use memloop::memory::store::{MemoryDoc, MemoryPath, MemoryType, WriteMode};
use memloop::memory::transcripts::TranscriptConfig;
use memloop::testkit::{MapStore, ScriptStep, ScriptedModel, WaitForRecall};
use memloop::{Extractor, MemorySetup, MemoryStore, SessionMemory, SetupError, async_trait};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The host's extractor: saves the last user message as a memory, through the store it is given.
struct SaveLastMessage {
    store: Arc<dyn MemoryStore>,
    runs: AtomicUsize,
}

#[async_trait]
impl Extractor for SaveLastMessage {
    async fn extract(&self, ctx: &ExtractionContext) -> Result<Vec<MemoryPath>, ExtractError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let text = ctx
            .new_messages
            .iter()
            .map(|m| m.text())
            .collect::<Vec<_>>()
            .join("\n");
        let doc = MemoryDoc::new(
            "Last words",
            "what the user said last",
            MemoryType::Project,
            &text,
        );
        let report = self
            .store
            .write("project_last_words.md", &doc, WriteMode::Overwrite)
            .await
            .map_err(|e| ExtractError::Failed(e.to_string()))?;
        Ok(vec![MemoryPath::new(&report.rel_path)?])
    }
}

/// The host's session memory: file notes, with every question compaction asks counted.
struct CountedNotes {
    inner: FileSessionNotes,
    asked: AtomicUsize,
}

#[async_trait]
impl SessionMemory for CountedNotes {
    fn is_enabled(&self) -> bool {
        self.inner.is_enabled()
    }
    fn notes_path(&self) -> PathBuf {
        self.inner.notes_path()
    }
    async fn current_notes(&self) -> Result<Option<String>, SessionMemoryError> {
        self.inner.current_notes().await
    }
    fn should_update(&self, ctx: &HookContext) -> bool {
        self.inner.should_update(ctx)
    }
    fn update(&self, ctx: &HookContext, trigger: UpdateTrigger) -> UpdateFuture {
        self.inner.update(ctx, trigger)
    }
    fn update_in_flight_since(&self) -> Option<tokio::time::Instant> {
        self.inner.update_in_flight_since()
    }
    async fn notes_for_compaction(&self) -> Result<Option<CompactionNotes>, SessionMemoryError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.inner.notes_for_compaction().await
    }
    fn reset_baselines(&self, context_tokens: u64, summarized: Option<MessageId>) {
        self.inner.reset_baselines(context_tokens, summarized)
    }
}

fn after_tool_result(req: &ModelRequest) -> bool {
    req.messages
        .last()
        .is_some_and(|m| m.tool_result_ids().next().is_some())
}

fn setup(home: &std::path::Path, project: &std::path::Path) -> MemorySetup {
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.to_str().unwrap())]);
    MemorySetup::with_resolver(MemoryDirResolver::new(project), env).unwrap()
}

#[tokio::test]
async fn every_part_works_over_a_store_extractor_and_session_memory_of_the_host() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> =
        Arc::new(MapStore::with_local_dir(home.path().join("map-local")));
    let extractor = Arc::new(SaveLastMessage {
        store: store.clone(),
        runs: AtomicUsize::new(0),
    });
    let base = setup(home.path(), project.path());
    let notes_config = base.default_notes_config().unwrap();
    let memory = base
        .memory_store(store.clone())
        .extractor(extractor.clone())
        .transcripts(TranscriptConfig {
            enabled: false,
            ..TranscriptConfig::default()
        });
    assert!(memory.memory_dir().is_none(), "no memory dir: the map is");

    // Session 1: the model saves a memory with the `memory_write` tool; the host's extractor
    // runs after the turn.
    let model = ScriptedModel::new()
        .then(ScriptStep::tool(
            "memory_write",
            json!({
                "topic": "feedback_deploy_days", "type": "feedback",
                "description": "production deploys happen on Tuesdays only",
                "content": "Deploy to production on Tuesdays only.",
            }),
        ))
        .then(ScriptStep::text("Noted."))
        .then(ScriptStep::text("Fine."));
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model)))
        .unwrap()
        .build();
    agent
        .run_turn("Remember: we deploy to production on Tuesdays only.")
        .await
        .unwrap();
    assert!(agent.drain(Duration::from_secs(60)).await.completed);
    // The extractor does not run after a turn in which the agent saved memories itself.
    assert_eq!(extractor.runs.load(Ordering::SeqCst), 0);
    agent
        .run_turn("The release manager is Dana, she signs off every deploy.")
        .await
        .unwrap();
    assert!(agent.drain(Duration::from_secs(60)).await.completed);
    let saved = store.read("feedback_deploy_days.md").await.unwrap();
    assert_eq!(saved.body.trim(), "Deploy to production on Tuesdays only.");
    assert_eq!(extractor.runs.load(Ordering::SeqCst), 1);
    let last_words = store.read("project_last_words.md").await.unwrap();
    assert!(
        last_words.body.contains("Tuesdays only"),
        "{}",
        last_words.body
    );
    // Nothing went to the memory dir the project would have had.
    let would_be = home.path().join("projects");
    let on_disk: Vec<_> = walkdir(&would_be)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    assert!(on_disk.is_empty(), "{on_disk:?}");

    // Session 2: a new agent; recall surfaces the memory from the map next to the message, and
    // compaction asks the host's session memory for the notes.
    let notes = Arc::new(CountedNotes {
        inner: FileSessionNotes::new(notes_config, "session-2").unwrap(),
        asked: AtomicUsize::new(0),
    });
    let memory = memory.session_memory(notes.clone());
    let recalled = Arc::new(WaitForRecall::new());
    let model = ScriptedModel::new()
        .on_purpose("main", |req| {
            Some(if after_tool_result(req) {
                ScriptStep::text("Not on Friday.")
            } else {
                ScriptStep::tool(WaitForRecall::NAME, json!({}))
            })
        })
        .on_purpose("compact_summary", |_| {
            Some(ScriptStep::text(
                "The user asked whether to deploy on a Friday.",
            ))
        });
    let builder = Agent::builder(Arc::new(model.clone()))
        .tool(recalled.clone())
        .events(recalled);
    let mut agent = memory.attach(builder).unwrap().build();
    agent
        .run_turn("Can we deploy the billing fix to production this Friday?")
        .await
        .unwrap();
    let last = model.requests_for("main").pop().unwrap();
    let seen: String = last.messages.iter().map(|m| m.text()).collect();
    assert!(
        seen.contains("Deploy to production on Tuesdays only."),
        "{seen}"
    );
    assert!(agent.drain(Duration::from_secs(60)).await.completed);
    agent.compact_now().await.unwrap();
    assert!(
        notes.asked.load(Ordering::SeqCst) > 0,
        "compaction asked the notes"
    );
}

#[tokio::test]
async fn a_part_the_store_cannot_carry_is_an_error_naming_it() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> =
        Arc::new(MapStore::with_local_dir(home.path().join("map-local")));
    // Transcripts on (the default): the map keeps none.
    let memory = setup(home.path(), project.path()).memory_store(store.clone());
    let model = Arc::new(ScriptedModel::new());
    let Err(err) = memory.attach(Agent::builder(model.clone())) else {
        panic!("attach refuses transcripts over a store without a transcript dir");
    };
    let SetupError::Unsupported { missing, .. } = &err else {
        panic!("{err}");
    };
    let parts: Vec<&str> = missing.iter().map(|m| m.part).collect();
    assert_eq!(parts, ["session transcripts"], "{err}");
    let text = err.to_string();
    assert!(text.contains("in-memory store `map-"), "{text}");
    assert!(text.contains("a MapStore keeps no transcripts"), "{text}");
    // Turned off, the rest attaches.
    let memory = memory.transcripts(TranscriptConfig {
        enabled: false,
        ..TranscriptConfig::default()
    });
    assert!(memory.attach(Agent::builder(model)).is_ok());
}

#[tokio::test]
async fn the_dream_needs_a_lock_dir() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    // A map given no local dir: locks, session records and session notes have nowhere to go.
    let store = Arc::new(MapStore::new());
    let memory = setup(home.path(), project.path())
        .memory_store(store)
        .transcripts(TranscriptConfig {
            enabled: false,
            ..TranscriptConfig::default()
        });
    let model = Arc::new(ScriptedModel::new());
    let Err(err) = memory.attach(Agent::builder(model.clone())) else {
        panic!("attach refuses the dream over a store without a local dir");
    };
    let SetupError::Unsupported { missing, .. } = &err else {
        panic!("{err}");
    };
    assert!(
        missing
            .iter()
            .any(|m| m.part == "consolidation (dream)" && m.switch == "dream(false)"),
        "{err}"
    );
    let memory = memory.dream(false).without_compaction();
    assert!(memory.attach(Agent::builder(model)).is_ok());
}

/// Every file under `dir` (none when it does not exist).
fn walkdir(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walkdir(&path));
        } else {
            out.push(path);
        }
    }
    out
}
