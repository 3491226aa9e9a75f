//! `MemorySetup` wires memory into an agent and honours `MEMLOOP_DISABLE_AUTO_MEMORY`.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use memloop::MemorySetup;
use memloop::core::{
    Agent,
    events::{AgentEvent, VecSink},
};
use memloop::host::env::EnvVars;
use memloop::memory::MemoryEvent;
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::recall::RecallEvent;
use memloop::testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;
use std::time::Duration;

async fn run(
    env: EnvVars,
    project: &std::path::Path,
) -> (ScriptedModel, Vec<AgentEvent>, MemorySetup) {
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project), env).unwrap();
    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("ok")))
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing to save")));
    let events = VecSink::default();
    let builder = Agent::builder(Arc::new(model.clone())).events(Arc::new(events.clone()));
    let mut agent = memory.attach(builder).unwrap().build();
    agent
        .run_turn("we release on the first Monday of each month")
        .await
        .unwrap();
    assert!(agent.drain(Duration::from_secs(30)).await.completed);
    (model, events.events(), memory)
}

#[tokio::test]
async fn memory_is_wired_in_by_default() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let (model, events, memory) = run(env, project.path()).await;
    assert!(memory.enabled());
    assert!(memory.memory_dir().unwrap().dir.starts_with(home.path()));
    let main = &model.requests_for("main")[0];
    let tools: Vec<&str> = main.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        tools.contains(&"memory_read") && tools.contains(&"memory_write"),
        "{tools:?}"
    );
    assert!(main.system.iter().any(|s| s.contains("MEMORY.md")));
    // The stop hook ran the extractor in the background.
    assert_eq!(model.requests_for("extractor").len(), 1);
    // Whether recall settled before this one-call turn ended is a race by design (it never
    // blocks the turn), so only the absence of failures is asserted here.
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.extension(), Some(MemoryEvent::ExtractionFailed { .. })))
    );
}

#[tokio::test]
async fn the_kill_switch_turns_every_memory_feature_off() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([
        ("MEMLOOP_HOME", home.path().to_str().unwrap()),
        ("MEMLOOP_DISABLE_AUTO_MEMORY", "True"),
    ]);
    let (model, events, memory) = run(env, project.path()).await;
    assert!(!memory.enabled());
    let main = &model.requests_for("main")[0];
    assert!(main.tools.is_empty());
    assert!(main.system.iter().all(|s| !s.contains("MEMORY.md")));
    assert!(model.requests_for("extractor").is_empty());
    assert!(!events.iter().any(|e| {
        e.extension::<RecallEvent>().is_some()
            || matches!(
                e.extension::<MemoryEvent>(),
                Some(MemoryEvent::ExtractionSkipped { .. })
            )
    }));
}

#[tokio::test]
async fn project_instructions_load_into_the_system_prompt_before_memory() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("CLAUDE.md"),
        "Use tabs.\n\n@docs/style.md\n",
    )
    .unwrap();
    std::fs::create_dir(project.path().join("docs")).unwrap();
    std::fs::write(
        project.path().join("docs/style.md"),
        "Wrap at 100 columns.\n",
    )
    .unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env)
        .unwrap()
        .instructions(
            memloop::memory::instructions::InstructionConfig::claude(
                &memloop::host::env::EnvVars::default(),
            )
            .with_project_root(project.path())
            .with_managed_root(None)
            .with_user_base(None),
        );
    let model = ScriptedModel::new().on_purpose("main", |_| Some(ScriptStep::text("ok")));
    let builder = Agent::builder(Arc::new(model.clone()));
    let mut agent = memory.attach(builder).unwrap().build();
    agent.run_turn("hello there").await.unwrap();
    let system = &model.requests_for("main")[0].system;
    let instructions = system
        .iter()
        .position(|s| s.contains("Use tabs."))
        .expect("instructions loaded");
    assert!(
        system[instructions].contains("Wrap at 100 columns."),
        "the @include was followed"
    );
    let memory_section = system.iter().position(|s| s.contains("MEMORY.md")).unwrap();
    assert!(instructions < memory_section);
}

/// With `MemorySetup`'s defaults the dream's session gate counts
/// the session records memloop writes itself: sessions one to five are skipped at the session
/// gate, the sixth consolidates.
#[tokio::test]
async fn the_dream_runs_after_five_sessions_with_the_defaults() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env).unwrap();
    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("ok")))
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing to save")))
        .on_purpose("dream", |_| Some(ScriptStep::text("consolidated")));
    let mut dream_events = Vec::new();
    for _session in 1..=6 {
        let events = VecSink::default();
        let builder = Agent::builder(Arc::new(model.clone())).events(Arc::new(events.clone()));
        let mut agent = memory.attach(builder).unwrap().build();
        agent.run_turn("hello").await.unwrap();
        assert!(agent.drain(Duration::from_secs(30)).await.completed);
        dream_events.push(
            events
                .events()
                .into_iter()
                .find_map(|e| match e.extension::<MemoryEvent>() {
                    Some(MemoryEvent::DreamSkipped { gate }) => Some(gate.clone()),
                    Some(MemoryEvent::DreamFinished { .. }) => Some("finished".into()),
                    _ => None,
                })
                .unwrap(),
        );
    }
    assert_eq!(
        dream_events,
        [
            "sessions", "sessions", "sessions", "sessions", "sessions", "finished"
        ]
    );
    assert_eq!(model.requests_for("dream").len(), 1);
}

/// Switched off means no disk access: no `HOME` needed, no dir, no lock file created; and an
/// unrecognised switch value is not silently taken as "on" or "off" without a word.
#[tokio::test]
async fn switched_off_memory_touches_no_disk_and_needs_no_home() {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("proj");
    std::fs::create_dir(&project).unwrap();
    let mem = root.path().join("x").join("mem");
    let env = EnvVars::from_pairs([
        ("MEMLOOP_DISABLE_AUTO_MEMORY", "1"),
        ("MEMLOOP_MEMORY_DIR", mem.to_str().unwrap()),
    ]);
    let (model, _events, memory) = run(env, &project).await;
    assert!(!memory.enabled());
    assert!(memory.store().is_none() && memory.memory_dir().is_none());
    assert!(model.requests_for("main")[0].tools.is_empty());
    assert!(!root.path().join("x").exists(), "nothing created");
    let mut listing: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    listing.sort();
    assert_eq!(listing, ["proj"]);
    assert_eq!(std::fs::read_dir(&project).unwrap().count(), 0);

    // No HOME and no MEMLOOP_HOME at all: still fine when switched off.
    let env = EnvVars::from_pairs([("MEMLOOP_DISABLE_AUTO_MEMORY", "yes")]);
    assert!(
        !MemorySetup::with_resolver(MemoryDirResolver::new(&project), env)
            .unwrap()
            .enabled()
    );
}

/// A deterministic test double for an embedding model: one dimension per concept word list
/// (not a model; the real embedders have their own tests). It counts the texts it embeds and
/// notifies `embedded` once the memory (its second text) is done.
struct ConceptEmbedder(std::sync::atomic::AtomicUsize, Arc<tokio::sync::Notify>);

/// The main model answers only after the embedder has embedded the memory, so the turn (and its
/// recall, dropped at the end of the turn if unfinished) lasts until recall has used it.
struct AfterRecall {
    inner: ScriptedModel,
    embedded: Arc<tokio::sync::Notify>,
}

#[memloop::async_trait]
impl memloop::core::model::Model for AfterRecall {
    fn name(&self) -> &str {
        "after-recall"
    }
    async fn complete(
        &self,
        request: memloop::core::model::ModelRequest,
        cancel: memloop::core::CancellationToken,
    ) -> Result<memloop::core::model::ModelResponse, memloop::core::model::ModelError> {
        self.embedded.notified().await;
        self.inner.complete(request, cancel).await
    }
}

#[memloop::async_trait]
impl memloop::core::embed::Embedder for ConceptEmbedder {
    fn model_id(&self) -> &str {
        "concepts-test"
    }
    fn dimension(&self) -> usize {
        3
    }
    async fn embed(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, memloop::core::embed::EmbedError> {
        let before = self
            .0
            .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
        if before + texts.len() >= 2 {
            // Stores a permit: the model goes on after this call returns. On the test's
            // current-thread runtime the selector saves its cache before it next yields.
            self.1.notify_one();
        }
        Ok(texts
            .iter()
            .map(|t| {
                let t = t.to_lowercase();
                let has = |ws: &[&str]| ws.iter().any(|w| t.contains(w)) as u8 as f32;
                let mut v = vec![
                    has(&["release", "ship", "deploy"]),
                    has(&["nurse", "work"]),
                    0.1,
                ];
                memloop::core::embed::normalize(&mut v);
                v
            })
            .collect())
    }
}

#[tokio::test]
async fn an_embedder_makes_recall_hybrid_with_vectors_cached_beside_the_memory_dir() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let embedded = Arc::new(tokio::sync::Notify::new());
    let embedder = Arc::new(ConceptEmbedder(Default::default(), embedded.clone()));
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env)
        .unwrap()
        .embedder(embedder.clone())
        .extraction(false)
        .dream(false);
    let store = memory.store().unwrap().clone();
    let doc = memloop::memory::store::MemoryDoc::new(
        "shipping",
        "We ship on the first Monday of each month",
        memloop::memory::store::MemoryType::Project,
        "The train leaves monthly.",
    );
    store
        .write(
            "shipping.md",
            &doc,
            memloop::memory::store::WriteMode::Overwrite,
        )
        .await
        .unwrap();
    let model = AfterRecall {
        inner: ScriptedModel::new().on_purpose("main", |_| Some(ScriptStep::text("ok"))),
        embedded,
    };
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model)))
        .unwrap()
        .build();
    agent.run_turn("when do we deploy?").await.unwrap();
    assert!(agent.drain(Duration::from_secs(30)).await.completed);
    let dir = store.describe().dir().unwrap().to_path_buf();
    let cache = memloop::memory::recall::vector_cache_for(&*store, "concepts-test");
    assert_eq!(
        cache,
        memloop::memory::recall::vector_cache_path(&dir, "concepts-test")
    );
    assert!(cache.is_file(), "no vector cache at {}", cache.display());
    assert!(
        !cache.starts_with(&dir),
        "the memory dir holds only memories"
    );
    // The query and the one memory.
    assert_eq!(embedder.0.load(std::sync::atomic::Ordering::SeqCst), 2);
}

/// Transcripts are on by default: the conversation lands in `<project dir>/<session>.jsonl`, the
/// agent gets the search tool and the guidance; switched off, none of the three.
#[tokio::test]
async fn transcripts_are_written_by_default_and_can_be_switched_off() {
    use memloop::memory::transcripts::{TRANSCRIPT_SEARCH, TranscriptConfig, TranscriptDir};
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let (model, _events, memory) = run(env.clone(), project.path()).await;
    let main = &model.requests_for("main")[0];
    assert!(main.tools.iter().any(|t| t.name == TRANSCRIPT_SEARCH));
    assert!(
        main.system
            .iter()
            .any(|s| s.contains("## Searching past context"))
    );
    let dir = TranscriptDir::new(memory.project_dir().unwrap());
    let sessions = dir.list().unwrap();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let t = dir.load(&sessions[0].id).unwrap();
    assert_eq!(t.conversation().len(), 2);
    assert!(t.conversation()[0].text().contains("first Monday"));

    let off = tempfile::tempdir().unwrap();
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(off.path()), env)
        .unwrap()
        .transcripts(TranscriptConfig {
            enabled: false,
            ..TranscriptConfig::default()
        });
    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("ok")))
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing")));
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model.clone())))
        .unwrap()
        .build();
    agent.run_turn("hello there").await.unwrap();
    agent.drain(Duration::from_secs(30)).await;
    let main = &model.requests_for("main")[0];
    assert!(!main.tools.iter().any(|t| t.name == TRANSCRIPT_SEARCH));
    assert!(
        !main
            .system
            .iter()
            .any(|s| s.contains("Searching past context"))
    );
    let dir = TranscriptDir::new(memory.project_dir().unwrap());
    assert!(dir.list().unwrap().is_empty());
}

/// `MEMLOOP_REDACT_TRANSCRIPTS=1` reaches the transcript writer: a password the user pastes is
/// a `[redacted: …]` marker in the JSONL; without the switch the JSONL keeps it.
#[tokio::test]
async fn memloop_redact_transcripts_redacts_the_jsonl() {
    use memloop::memory::transcripts::TranscriptDir;
    const PASSWORD: &str = "Qw7zLp2Vn9";
    for on in [true, false] {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let mut env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
        if on {
            env = env.with("MEMLOOP_REDACT_TRANSCRIPTS", "1");
        }
        let memory =
            MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env).unwrap();
        let model = ScriptedModel::new()
            .on_purpose("main", |_| Some(ScriptStep::text("noted")))
            .on_purpose("extractor", |_| Some(ScriptStep::text("nothing")));
        let mut agent = memory
            .attach(Agent::builder(Arc::new(model.clone())))
            .unwrap()
            .build();
        agent
            .run_turn(&format!("the wifi password for the office is {PASSWORD}"))
            .await
            .unwrap();
        agent.drain(Duration::from_secs(30)).await;
        let dir = TranscriptDir::new(memory.project_dir().unwrap());
        let sessions = dir.list().unwrap();
        assert_eq!(sessions.len(), 1, "{sessions:?}");
        let text = std::fs::read_to_string(&sessions[0].path).unwrap();
        assert_eq!(text.contains(PASSWORD), !on, "on={on}: {text}");
        assert_eq!(text.contains("[redacted: "), on, "on={on}: {text}");
    }
}

/// `MemorySetup::resume` reads a session's conversation back from its transcript; an agent built
/// on it under the same session id continues the transcript without writing a message twice.
#[tokio::test]
async fn a_session_resumed_through_the_setup_continues_its_transcript() {
    use memloop::core::AgentConfig;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env).unwrap();
    let config = AgentConfig {
        session_id: "resume-me".into(),
        ..AgentConfig::default()
    };
    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("ok")))
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing")));
    for turn in ["first turn", "second turn"] {
        let history = memory.resume("resume-me").unwrap_or_default();
        let mut agent = memory
            .attach(
                Agent::builder(Arc::new(model.clone()))
                    .config(config.clone())
                    .messages(history),
            )
            .unwrap()
            .build();
        agent.run_turn(turn).await.unwrap();
        agent.drain(Duration::from_secs(30)).await;
    }
    let history = memory.resume("resume-me").unwrap();
    let texts: Vec<String> = history.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["first turn", "ok", "second turn", "ok"]);
    let t = memory.transcript_dir().unwrap().load("resume-me").unwrap();
    assert_eq!(t.records.len(), 4);
    // The second session's first request carried the first session's conversation.
    let last = model.requests_for("main").pop().unwrap();
    assert_eq!(last.messages.len(), 3);
}
