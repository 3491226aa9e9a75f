//! `MemorySetup`'s Claude Code defaults: project instructions and session-notes compaction on
//! (each with an opt-out), a side model for selection with the lexical fallback, settings that
//! switch memory off, managed settings that set the memory dir, extra prompt guidelines.
#![allow(clippy::unwrap_used)]

use memloop::MemorySetup;
use memloop::core::{
    Agent,
    events::AgentEvent,
    model::{Model, ModelError, ModelRequest, ModelResponse},
};
use memloop::host::env::EnvVars;
use memloop::memory::paths::{MemoryDirResolver, ResolutionRule};
use memloop::memory::recall::RecallEvent;
use memloop::memory::recall::SELECTOR_PURPOSE;
use memloop::testkit::{ScriptStep, ScriptedModel};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn env(home: &Path) -> EnvVars {
    EnvVars::from_pairs([("MEMLOOP_HOME", home.to_str().unwrap())])
}

/// A resolver that reads no system-wide managed settings (a test must not depend on /etc).
fn resolver(project: &Path) -> MemoryDirResolver {
    MemoryDirResolver::new(project).managed_settings(project.join("no-managed-settings.json"))
}

async fn first_request(memory: &MemorySetup) -> ModelRequest {
    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("ok")))
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing")));
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model.clone())))
        .unwrap()
        .build();
    agent.run_turn("hello there").await.unwrap();
    agent.drain(Duration::from_secs(30)).await;
    model.requests_for("main").remove(0)
}

#[tokio::test]
async fn instructions_and_compaction_are_on_by_default_each_with_an_opt_out() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("CLAUDE.md"), "Always use tabs.\n").unwrap();
    let memory = MemorySetup::with_resolver(resolver(project.path()), env(home.path())).unwrap();
    let req = first_request(&memory).await;
    assert!(req.system.iter().any(|s| s.contains("Always use tabs.")));
    assert!(req.tools.iter().any(|t| t.name == "edit_session_notes"));

    let memory = memory.without_instructions().without_compaction();
    let req = first_request(&memory).await;
    assert!(!req.system.iter().any(|s| s.contains("Always use tabs.")));
    assert!(!req.tools.iter().any(|t| t.name == "edit_session_notes"));
}

/// Session notes serve automatic compaction: with it switched off by the environment, the
/// notes are not kept (no notes tool, no updater), while the compactor stays for manual use.
#[tokio::test]
async fn session_notes_are_kept_only_with_automatic_compaction() {
    for switch in ["MEMLOOP_DISABLE_AUTO_COMPACT", "MEMLOOP_DISABLE_COMPACT"] {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let env = EnvVars::from_pairs([
            ("MEMLOOP_HOME", home.path().to_str().unwrap()),
            (switch, "1"),
        ]);
        let memory = MemorySetup::with_resolver(resolver(project.path()), env).unwrap();
        let req = first_request(&memory).await;
        assert!(
            !req.tools.iter().any(|t| t.name == "edit_session_notes"),
            "{switch}: the notes are still kept"
        );
    }
}

/// A side model that always fails.
struct Broken;

#[async_trait::async_trait]
impl Model for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    async fn complete(
        &self,
        _req: ModelRequest,
        _cancel: memloop::core::CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        Err(ModelError::Other("side model down".into()))
    }
}

async fn surfaced_with(side: Arc<dyn Model>, home: &Path, project: &Path) -> Vec<String> {
    surfaced_with_rerank(side, home, project, false).await
}

async fn surfaced_with_rerank(
    side: Arc<dyn Model>,
    home: &Path,
    project: &Path,
    rerank: bool,
) -> Vec<String> {
    let memory = MemorySetup::with_resolver(resolver(project), env(home))
        .unwrap()
        .without_compaction()
        .side_model(side)
        .rerank(rerank);
    let store = memory.store().unwrap().clone();
    let lunch = memloop::memory::store::MemoryDoc {
        name: "lunch".into(),
        description: "team lunch is on thursdays".into(),
        memory_type: Some(memloop::memory::store::MemoryType::Project),
        body: "Thai food, usually.".into(),
    };
    store
        .write(
            "lunch.md",
            &lunch,
            memloop::memory::store::WriteMode::Overwrite,
        )
        .await
        .unwrap();
    if rerank {
        // A second deploy memory, so that BM25's short list has two to re-rank.
        let freeze = memloop::memory::store::MemoryDoc {
            name: "deploy freeze".into(),
            description: "no deploy during the release freeze".into(),
            memory_type: Some(memloop::memory::store::MemoryType::Project),
            body: "The freeze starts two days before a release.".into(),
        };
        store
            .write(
                "freeze.md",
                &freeze,
                memloop::memory::store::WriteMode::Overwrite,
            )
            .await
            .unwrap();
    }
    let doc = memloop::memory::store::MemoryDoc {
        name: "deploy days".into(),
        description: "we deploy on tuesdays only".into(),
        memory_type: Some(memloop::memory::store::MemoryType::Project),
        body: "Deploys happen on Tuesdays.".into(),
    };
    store
        .write(
            "deploy.md",
            &doc,
            memloop::memory::store::WriteMode::Overwrite,
        )
        .await
        .unwrap();
    // The first main call waits until recall settled, so the outcome does not depend on timing.
    let surfaced = Arc::new(tokio::sync::Notify::new());
    let signal = surfaced.clone();
    let paths = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = paths.clone();
    let sink = move |e: AgentEvent| {
        if let Some(RecallEvent::MemoriesSurfaced { paths, .. }) = e.extension() {
            seen.lock().unwrap().extend(paths.iter().cloned());
            signal.notify_one();
        }
    };
    let main = ScriptedModel::new()
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing")))
        .then(ScriptStep::text("ok"));
    let waiting = WaitThen(surfaced, main);
    let mut agent = memory
        .attach(Agent::builder(Arc::new(waiting)).events(Arc::new(sink)))
        .unwrap()
        .build();
    agent.run_turn("which day do we deploy?").await.unwrap();
    agent.drain(Duration::from_secs(30)).await;
    paths.lock().map(|p| p.clone()).unwrap()
}

/// The main model: its first call waits for `Notify`.
struct WaitThen(Arc<tokio::sync::Notify>, ScriptedModel);

#[async_trait::async_trait]
impl Model for WaitThen {
    fn name(&self) -> &str {
        "main"
    }
    async fn complete(
        &self,
        req: ModelRequest,
        cancel: memloop::core::CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        if req.purpose == "main" {
            // Bounded, so a recall that never surfaces fails the test instead of hanging it.
            let _ = tokio::time::timeout(Duration::from_secs(10), self.0.notified()).await;
        }
        self.1.complete(req, cancel).await
    }
}

#[tokio::test]
async fn a_side_model_selects_with_one_query_and_the_lexical_selector_backs_it_up() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let side = ScriptedModel::new().on_purpose(SELECTOR_PURPOSE, |_| {
        Some(ScriptStep::text(r#"{"selected_memories": ["deploy.md"]}"#))
    });
    let got = surfaced_with(Arc::new(side.clone()), home.path(), project.path()).await;
    assert_eq!(got, ["deploy.md"]);
    assert_eq!(
        side.requests_for(SELECTOR_PURPOSE).len(),
        1,
        "one side query"
    );

    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let got = surfaced_with(Arc::new(Broken), home.path(), project.path()).await;
    assert_eq!(
        got,
        ["deploy.md"],
        "BM25 answered when the side model failed"
    );
}

#[tokio::test]
async fn with_rerank_the_side_model_sees_only_the_lexical_short_list() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let side = ScriptedModel::new().on_purpose(SELECTOR_PURPOSE, |_| {
        Some(ScriptStep::text(r#"{"selected_memories": ["deploy.md"]}"#))
    });
    let got = surfaced_with_rerank(Arc::new(side.clone()), home.path(), project.path(), true).await;
    assert_eq!(got, ["deploy.md"]);
    let asked = side.requests_for(SELECTOR_PURPOSE);
    assert_eq!(asked.len(), 1, "one side query");
    let shown = format!("{:?}", asked[0].messages);
    assert!(
        shown.contains("deploy.md") && shown.contains("freeze.md"),
        "{shown}"
    );
    assert!(
        !shown.contains("lunch.md"),
        "BM25 did not short-list the lunch memory: {shown}"
    );

    // Without rerank the side model sees every memory.
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let side = ScriptedModel::new().on_purpose(SELECTOR_PURPOSE, |_| {
        Some(ScriptStep::text(r#"{"selected_memories": ["deploy.md"]}"#))
    });
    surfaced_with(Arc::new(side.clone()), home.path(), project.path()).await;
    let shown = format!("{:?}", side.requests_for(SELECTOR_PURPOSE)[0].messages);
    assert!(shown.contains("lunch.md"), "{shown}");

    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let got = surfaced_with_rerank(Arc::new(Broken), home.path(), project.path(), true).await;
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["deploy.md", "freeze.md"],
        "BM25's short list when the side model failed"
    );
}

#[tokio::test]
async fn settings_can_switch_memory_off_and_the_nearest_file_wins() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let app = project.path().join(".memloop");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(app.join("settings.json"), r#"{"autoMemoryEnabled": false}"#).unwrap();
    let memory = MemorySetup::with_resolver(resolver(project.path()), env(home.path())).unwrap();
    assert!(!memory.enabled());
    let req = first_request(&memory).await;
    assert!(req.system.iter().all(|s| !s.contains("MEMORY.md")));

    std::fs::write(
        app.join("settings.local.json"),
        r#"{"autoMemoryEnabled": true}"#,
    )
    .unwrap();
    let memory = MemorySetup::with_resolver(resolver(project.path()), env(home.path())).unwrap();
    assert!(memory.enabled());

    // Managed (policy) settings come first.
    let managed = project.path().join("managed.json");
    std::fs::write(&managed, r#"{"autoMemoryEnabled": false}"#).unwrap();
    let memory = MemorySetup::with_resolver(
        MemoryDirResolver::new(project.path()).managed_settings(&managed),
        env(home.path()),
    )
    .unwrap();
    assert!(!memory.enabled());
}

#[tokio::test]
async fn managed_settings_set_the_memory_dir_over_user_and_local_settings() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let app = project.path().join(".memloop");
    std::fs::create_dir_all(&app).unwrap();
    // Inside the project: settings a project ships may not move its memory elsewhere.
    let local = project.path().join("local-mem");
    std::fs::write(
        app.join("settings.local.json"),
        serde_json::json!({"memory_dir": local}).to_string(),
    )
    .unwrap();
    let policy = home.path().join("policy-mem");
    let managed = home.path().join("managed-settings.json");
    std::fs::write(
        &managed,
        serde_json::json!({"memory_dir": policy}).to_string(),
    )
    .unwrap();
    let r = MemoryDirResolver::new(project.path())
        .env(env(home.path()))
        .managed_settings(&managed)
        .resolve()
        .unwrap();
    assert_eq!((r.rule, r.dir), (ResolutionRule::ManagedSettings, policy));
    let r = resolver(project.path())
        .env(env(home.path()))
        .resolve()
        .unwrap();
    assert_eq!((r.rule, r.dir), (ResolutionRule::LocalSettings, local));
}

#[tokio::test]
async fn an_environment_variable_appends_guidelines_to_the_memory_prompt() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = env(home.path()).with(
        "MEMLOOP_MEMORY_EXTRA_GUIDELINES",
        "Never save anything about customers.",
    );
    let memory = MemorySetup::with_resolver(resolver(project.path()), env).unwrap();
    let req = first_request(&memory).await;
    let section = req.system.iter().find(|s| s.contains("MEMORY.md")).unwrap();
    assert!(section.contains("## Additional guidelines\n\nNever save anything about customers."));
}

#[tokio::test]
async fn claude_codes_extra_guidelines_count_in_its_layout() {
    for text in [
        "Never save anything about customers.",
        "不要保存任何客户信息。",
    ] {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let env = env(home.path())
            .with("CLAUDE_CONFIG_DIR", home.path().to_string_lossy())
            .with("CLAUDE_COWORK_MEMORY_EXTRA_GUIDELINES", text);
        let claude = MemoryDirResolver::claude_code(project.path())
            .managed_settings(project.path().join("no-managed-settings.json"));
        let memory = MemorySetup::with_resolver(claude, env.clone()).unwrap();
        let req = first_request(&memory).await;
        let section = req.system.iter().find(|s| s.contains("MEMORY.md")).unwrap();
        assert!(section.contains(&format!("## Additional guidelines\n\n{text}")));
        // memloop's own layout reads only memloop's variable.
        let memory = MemorySetup::with_resolver(resolver(project.path()), env).unwrap();
        let req = first_request(&memory).await;
        assert!(req.system.iter().all(|s| !s.contains(text)));
    }
}

#[tokio::test]
async fn daily_log_mode_switches_the_main_agents_prompt_and_tools_too() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let memory = MemorySetup::with_resolver(resolver(project.path()), env(home.path())).unwrap();
    let req = first_request(&memory).await;
    assert!(!req.tools.iter().any(|t| t.name == "memory_log_append"));
    assert!(req.system.iter().all(|s| !s.contains("Daily-log mode")));

    let memory = memory.daily_log(true);
    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("ok")))
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing")));
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model.clone())))
        .unwrap()
        .build();
    agent.run_turn("we ship on tuesdays").await.unwrap();
    agent.drain(Duration::from_secs(30)).await;
    let main = &model.requests_for("main")[0];
    assert!(main.tools.iter().any(|t| t.name == "memory_log_append"));
    let section = main
        .system
        .iter()
        .find(|s| s.contains("MEMORY.md"))
        .unwrap();
    assert!(section.contains("## Daily-log mode"), "{section}");
    assert!(section.contains("memory_log_append"));
    // The extractor runs in daily-log mode as well (its prompt says so).
    let extractor = &model.requests_for("extractor")[0];
    assert!(
        extractor
            .last_user_text()
            .unwrap()
            .contains("Daily-log mode is on")
    );
}

/// Run one turn asking `question` of `memory`, whose store holds `memories` (path, description,
/// body); the recall events of the turn.
#[cfg(all(feature = "candle", unix))]
async fn recall_events(
    memory: &MemorySetup,
    memories: &[(&str, &str, &str)],
    question: &str,
) -> Vec<RecallEvent> {
    let store = memory.store().unwrap().clone();
    for (rel, description, body) in memories {
        let doc = memloop::memory::store::MemoryDoc {
            name: rel.trim_end_matches(".md").into(),
            description: (*description).into(),
            memory_type: Some(memloop::memory::store::MemoryType::Project),
            body: (*body).into(),
        };
        store
            .write(rel, &doc, memloop::memory::store::WriteMode::Overwrite)
            .await
            .unwrap();
    }
    // The main call waits until recall has told its outcome (surfaced or degraded).
    let settled = Arc::new(tokio::sync::Notify::new());
    let signal = settled.clone();
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = events.clone();
    let sink = move |e: AgentEvent| {
        if let Some(event) = e.extension::<RecallEvent>() {
            seen.lock().unwrap().push(event.clone());
            if matches!(event, RecallEvent::MemoriesSurfaced { .. }) {
                signal.notify_one();
            }
        }
    };
    let main = ScriptedModel::new()
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing")))
        .then(ScriptStep::text("ok"));
    let mut agent = memory
        .attach(Agent::builder(Arc::new(WaitThen(settled, main))).events(Arc::new(sink)))
        .unwrap()
        .build();
    agent.run_turn(question).await.unwrap();
    agent.drain(Duration::from_secs(30)).await;
    events.lock().map(|e| e.clone()).unwrap()
}

#[cfg(all(feature = "candle", unix))]
fn surfaced(events: &[RecallEvent]) -> Vec<String> {
    events
        .iter()
        .flat_map(|e| match e {
            RecallEvent::MemoriesSurfaced { paths, .. } => paths.clone(),
            _ => Vec::new(),
        })
        .collect()
}

#[cfg(all(feature = "candle", unix))]
#[tokio::test]
async fn a_fetched_model_makes_recall_hybrid_by_default_and_a_broken_one_degrades_to_bm25() {
    let Some(e5) = std::env::var_os("MEMLOOP_TEST_E5_DIR").filter(|v| !v.is_empty()) else {
        memloop::testkit::skip_unless_ci("MEMLOOP_TEST_E5_DIR is unset (`.ci/models.sh`)");
        return;
    };
    let memories = [
        (
            "billing_db.md",
            "billing service database choice",
            "We chose PostgreSQL as the main database for the billing service.",
        ),
        (
            "lunch.md",
            "team lunch is on thursdays",
            "Thai food, usually.",
        ),
    ];
    // multilingual-e5-small in the Hugging Face cache, as `memloop models fetch` leaves it.
    let (home, project, hub) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let snapshot = hub
        .path()
        .join("models--intfloat--multilingual-e5-small/snapshots/abc");
    std::fs::create_dir_all(&snapshot).unwrap();
    for entry in std::fs::read_dir(&e5).unwrap().flatten() {
        #[cfg(unix)]
        std::os::unix::fs::symlink(entry.path(), snapshot.join(entry.file_name())).unwrap();
    }
    let env_with = |pairs: &[(&str, &str)]| {
        let mut env = env(home.path());
        for (k, v) in pairs {
            env = env.with(*k, *v);
        }
        env
    };
    let cached = env_with(&[("HF_HUB_CACHE", hub.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(resolver(project.path()), cached.clone())
        .unwrap()
        .without_compaction();
    memory.ready().await.unwrap();
    // A question in Chinese finds the English memory, first: no word in common. (The default
    // similarity floor is set for English models; e5's unrelated pairs score above it, so the
    // other memory may follow.)
    let events = recall_events(&memory, &memories, "计费服务用的是什么数据库？").await;
    assert_eq!(
        surfaced(&events).first().map(String::as_str),
        Some("billing_db.md"),
        "{events:?}"
    );

    // Opted out: BM25 alone finds no word in common with the question.
    let project = tempfile::tempdir().unwrap();
    let memory = MemorySetup::with_resolver(resolver(project.path()), cached)
        .unwrap()
        .without_compaction()
        .local_model(false);
    memory.ready().await.unwrap();
    let events = recall_events(&memory, &memories, "计费服务用的是什么数据库？").await;
    assert!(surfaced(&events).is_empty(), "{events:?}");

    // A configured model directory that is broken: recall still ranks (BM25) and says why.
    let project = tempfile::tempdir().unwrap();
    let broken = hub.path().join("not-a-model");
    std::fs::create_dir_all(&broken).unwrap();
    let memory = MemorySetup::with_resolver(
        resolver(project.path()),
        env_with(&[("MEMLOOP_EMBED_MODEL", broken.to_str().unwrap())]),
    )
    .unwrap()
    .without_compaction();
    let err = memory.ready().await.unwrap_err().to_string();
    assert!(err.contains("modules.json"), "{err}");
    let events = recall_events(&memory, &memories, "which database does billing use?").await;
    assert_eq!(surfaced(&events), ["billing_db.md"], "{events:?}");
    assert!(
        events.iter().any(|e| matches!(e, RecallEvent::RecallDegraded { selector, reason } if selector == "hybrid" && reason.contains("modules.json"))),
        "{events:?}"
    );
}
