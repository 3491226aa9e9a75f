//! `MemorySetup` with a store of the host's: nothing is created on disk but where the store
//! says (the memory dir is never opened), every part the store cannot carry is named in one
//! error, and the extractor reports memory paths, not files.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns unwrap too

use memloop::core::{Agent, events::VecSink, model::ModelRequest};
use memloop::host::env::EnvVars;
use memloop::memory::MemoryEvent;
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::transcripts::TranscriptConfig;
use memloop::testkit::{MapStore, ScriptStep, ScriptedModel};
use memloop::{MemorySetup, MemoryStore, SetupError};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn setup(home: &Path, project: &Path) -> MemorySetup {
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.to_str().unwrap())]);
    MemorySetup::with_resolver(MemoryDirResolver::new(project), env).unwrap()
}

fn transcripts_off() -> TranscriptConfig {
    TranscriptConfig {
        enabled: false,
        ..TranscriptConfig::default()
    }
}

fn after_tool_result(req: &ModelRequest) -> bool {
    req.messages
        .last()
        .is_some_and(|m| m.tool_result_ids().next().is_some())
}

/// Every entry (files and directories) under `dir`, sorted.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out.sort();
    out
}

/// A map with a local dir of its own, the dream, recall, extraction and compaction on (only
/// transcripts off: a map keeps none): after a turn whose extractor saves a memory, neither
/// memloop's home nor the project holds anything new; the memory is in the map, and the
/// saved event names it by its memory path.
#[tokio::test]
async fn a_store_of_the_hosts_creates_nothing_in_the_home_or_the_project() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("README.md"), "# Projet café\n").unwrap();
    let (home_before, project_before) = (walk(home.path()), walk(project.path()));

    let map = Arc::new(MapStore::with_local_dir(elsewhere.path().join("map-local")));
    let store: Arc<dyn MemoryStore> = map.clone();
    let memory = setup(home.path(), project.path())
        .memory_store(store.clone())
        .transcripts(transcripts_off())
        .saved_notice(true);
    assert!(memory.memory_dir().is_none());
    assert!(Arc::ptr_eq(memory.store().unwrap(), &store));
    // The default session notes (and the cut outputs of compaction) go where the store says.
    let notes = memory.default_notes_config().unwrap();
    assert!(
        notes
            .notes_path("s1")
            .starts_with(elsewhere.path().join("map-local"))
    );

    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("Noted.")))
        .on_purpose("extractor", |req| {
            Some(if after_tool_result(req) {
                ScriptStep::text("saved")
            } else {
                ScriptStep::tool(
                    "memory_write",
                    json!({"topic": "project_部署", "type": "project",
                           "description": "выкладка по вторникам, deploys on Tuesdays",
                           "content": "Deploys happen on Tuesdays (вторник, 周二).\n"}),
                )
            })
        });
    let events = VecSink::default();
    let builder = Agent::builder(Arc::new(model.clone())).events(Arc::new(events.clone()));
    let mut agent = memory.attach(builder).unwrap().build();
    agent
        .run_turn("We deploy on Tuesdays — выкладка по вторникам.")
        .await
        .unwrap();
    assert!(agent.drain(Duration::from_secs(60)).await.completed);

    assert_eq!(map.paths(), ["project_部署.md"]);
    let saved: Vec<Vec<String>> = events
        .events()
        .iter()
        .filter_map(|e| match e.extension() {
            Some(MemoryEvent::MemoriesSaved { paths }) => Some(paths.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(saved, [["project_部署.md"]]);
    // Nothing new in memloop's home (no memory dir, no notes, no records) or the project.
    assert_eq!(walk(home.path()), home_before);
    assert_eq!(walk(project.path()), project_before);
    // The next turn carries the notice, naming the memory path.
    agent.run_turn("Thanks.").await.unwrap();
    let last = model.requests_for("main").pop().unwrap();
    let seen: String = last.messages.iter().map(|m| m.text()).collect();
    assert!(seen.contains("Memory saved: project_部署.md"), "{seen}");
    assert!(agent.drain(Duration::from_secs(60)).await.completed);
    assert_eq!(walk(home.path()), home_before);
    assert_eq!(walk(project.path()), project_before);
}

/// The memory dir is opened (and created) when the setup first uses it, not when it is
/// resolved.
#[tokio::test]
async fn the_memory_dir_is_created_on_first_use() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let memory = setup(home.path(), project.path());
    let dir = memory.memory_dir().unwrap().dir.clone();
    assert!(!dir.exists(), "resolving created {}", dir.display());
    let store = memory.store().unwrap();
    assert!(dir.is_dir());
    assert_eq!(store.describe().dir(), Some(dir.as_path()));
    // Clones share the store opened once.
    assert!(Arc::ptr_eq(memory.clone().store().unwrap(), store));
}

/// A map with no local dir lacks what three parts need: one attach names all three (the part,
/// what it needs, why the store lacks it, the switch), and each switch takes its part off the
/// list.
#[tokio::test]
async fn every_part_the_store_cannot_carry_is_named_in_one_error() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let memory = setup(home.path(), project.path()).memory_store(Arc::new(MapStore::new()));
    let model = Arc::new(ScriptedModel::new());
    let missing_parts = |memory: &MemorySetup| -> Vec<&'static str> {
        match memory.attach(Agent::builder(model.clone())) {
            Ok(_) => Vec::new(),
            Err(SetupError::Unsupported { missing, .. }) => {
                missing.iter().map(|m| m.part).collect()
            }
            Err(e) => panic!("{e}"),
        }
    };

    let Err(err) = memory.attach(Agent::builder(model.clone())) else {
        panic!("attach refuses a store without local dirs");
    };
    let SetupError::Unsupported { store, missing } = &err else {
        panic!("{err}");
    };
    assert!(store.starts_with("in-memory store `map-"), "{store}");
    let parts: Vec<&str> = missing.iter().map(|m| m.part).collect();
    assert_eq!(
        parts,
        [
            "session transcripts",
            "consolidation (dream)",
            "compaction (session notes)"
        ]
    );
    let text = err.to_string();
    for m in missing {
        assert!(text.contains(&m.to_string()), "{text}");
        for piece in [m.part, m.needs, m.switch, m.why.as_str()] {
            assert!(text.contains(piece), "`{piece}` missing from: {text}");
        }
    }
    for piece in [
        "a MapStore keeps no transcripts",
        "a MapStore has no local dir",
        "transcripts(TranscriptConfig { enabled: false, .. })",
        "dream(false)",
        "without_compaction()",
    ] {
        assert!(text.contains(piece), "`{piece}` missing from: {text}");
    }
    assert_eq!(text.lines().count(), 4, "{text}");

    // Each switch takes its part off; notes of the host's need no dir.
    let memory = memory.dream(false);
    assert_eq!(
        missing_parts(&memory),
        ["session transcripts", "compaction (session notes)"]
    );
    let memory = memory.transcripts(transcripts_off());
    assert_eq!(missing_parts(&memory), ["compaction (session notes)"]);
    assert!(missing_parts(&memory.clone().without_compaction()).is_empty());
    let notes_dir = tempfile::tempdir().unwrap();
    let notes = memloop::memory::session_notes::FileSessionNotes::new(
        memloop::memory::session_notes::SessionNotesConfig::new(notes_dir.path()),
        "session-1",
    )
    .unwrap();
    assert!(missing_parts(&memory.session_memory(Arc::new(notes))).is_empty());
}
