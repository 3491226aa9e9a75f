//! Every recall, extraction and consolidation setting the docs call tunable is reachable from
//! `MemorySetup`: each test runs a real agent loop attached by `MemorySetup` and shows an outcome
//! that differs between the default and the configured value (so a setter whose value is not
//! passed on fails it).
#![allow(clippy::unwrap_used)]

use memloop::MemorySetup;
use memloop::core::events::{AgentEvent, EventSink};
use memloop::core::model::{Model, ModelError, ModelRequest, ModelResponse};
use memloop::core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
use memloop::core::{Agent, CancellationToken};
use memloop::host::env::EnvVars;
use memloop::memory::dream::DreamConfig;
use memloop::memory::extract::{ExtractorConfig, SchedulerConfig};
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::recall::{
    Bm25Params, HybridConfig, LlmSelectorConfig, RecallConfig, RecallEvent, RerankConfig,
    SELECTOR_PURPOSE,
};
use memloop::memory::store::{MemoryDoc, MemoryType, WriteMode};
use memloop::memory::transcripts::TranscriptConfig;
use memloop::testkit::{ScriptStep, ScriptedModel};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// A resolver that reads no system-wide managed settings (a test must not depend on /etc).
fn resolver(project: &Path) -> MemoryDirResolver {
    MemoryDirResolver::new(project).managed_settings(project.join("no-managed-settings.json"))
}

/// Memory for a project in tempdirs, with only recall among the background parts (each test
/// turns on what it looks at).
struct Project {
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Project {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        }
    }

    fn setup(&self) -> MemorySetup {
        let env = EnvVars::from_pairs([("MEMLOOP_HOME", self.home.path().to_str().unwrap())]);
        MemorySetup::with_resolver(resolver(self.project.path()), env)
            .unwrap()
            .without_compaction()
            .without_instructions()
            .extraction(false)
            .dream(false)
            .subagents(false)
            .transcripts(TranscriptConfig {
                enabled: false,
                ..TranscriptConfig::default()
            })
    }

    /// Write the memories `(path, name, description, body)` into the setup's memory dir.
    async fn remember(&self, memories: &[(&str, &str, &str, &str)]) {
        let store = self.setup().store().unwrap().clone();
        for (path, name, description, body) in memories {
            let doc = MemoryDoc::new(*name, *description, MemoryType::Project, *body);
            store.write(path, &doc, WriteMode::Overwrite).await.unwrap();
        }
    }
}

/// What recall did in one turn.
#[derive(Debug, Default, Clone)]
struct Turn {
    /// The paths surfaced, in the selector's order.
    surfaced: Vec<String>,
    /// The bytes surfaced.
    bytes: usize,
    /// Why recall surfaced nothing (`RecallSkipped`).
    skipped: Vec<String>,
    /// `RecallDegraded` reasons.
    degraded: Vec<String>,
    /// The text of the main model's last request of the turn (the attachment included).
    seen: String,
}

/// The recall events of the current turn, and a tool that returns once recall has settled
/// (surfaced, or skipped): the main model calls it first, so its next request carries what
/// recall attached, whatever the timing.
#[derive(Default)]
struct Settled {
    settled: Notify,
    turn: Mutex<Turn>,
}

const WAIT: &str = "wait_for_recall";

impl EventSink for Settled {
    fn emit(&self, event: AgentEvent) {
        let Some(event) = event.extension::<RecallEvent>() else {
            return;
        };
        let mut turn = self.turn.lock().unwrap();
        match event {
            RecallEvent::MemoriesSurfaced { paths, bytes } => {
                turn.surfaced.extend(paths.iter().cloned());
                turn.bytes += bytes;
                self.settled.notify_one();
            }
            RecallEvent::RecallSkipped { reason } => {
                turn.skipped.push(reason.clone());
                self.settled.notify_one();
            }
            RecallEvent::RecallDegraded { reason, .. } => turn.degraded.push(reason.clone()),
            _ => {}
        }
    }
}

#[memloop::async_trait]
impl Tool for Settled {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: WAIT.into(),
            description: "Returns once recall has settled.".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }

    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        // Bounded, so a recall that never settles fails the test instead of hanging it.
        match tokio::time::timeout(Duration::from_secs(60), self.settled.notified()).await {
            Ok(()) => ToolOutput::ok("recall settled"),
            Err(_) => ToolOutput::error("recall never settled"),
        }
    }
}

fn after_tool_result(req: &ModelRequest) -> bool {
    req.messages
        .last()
        .is_some_and(|m| m.tool_result_ids().next().is_some())
}

/// The main model: each turn calls [`WAIT`] first, then answers; the other purposes get a
/// plain answer.
fn main_model() -> ScriptedModel {
    ScriptedModel::new()
        .on_purpose("main", |req| {
            Some(if after_tool_result(req) {
                ScriptStep::text("ok")
            } else {
                ScriptStep::tool(WAIT, json!({}))
            })
        })
        .rule(|_| Some(ScriptStep::text("nothing to do")))
}

/// Run `queries` as consecutive turns of one agent attached by `memory`; what recall did in
/// each.
async fn turns(memory: &MemorySetup, queries: &[&str]) -> Vec<Turn> {
    let model = main_model();
    let settled = Arc::new(Settled::default());
    let mut agent = memory
        .attach(
            Agent::builder(Arc::new(model.clone()))
                .tool(settled.clone())
                .events(settled.clone()),
        )
        .unwrap()
        .build();
    let mut out = Vec::new();
    for query in queries {
        agent.run_turn(*query).await.unwrap();
        let mut turn = std::mem::take(&mut *settled.turn.lock().unwrap());
        let last = model.requests_for("main").pop().unwrap();
        turn.seen = last.messages.iter().map(|m| m.text()).collect();
        out.push(turn);
    }
    assert!(agent.drain(Duration::from_secs(60)).await.completed);
    out
}

async fn turn(memory: &MemorySetup, query: &str) -> Turn {
    turns(memory, &[query]).await.remove(0)
}

/// Three memories about the CI cache, in Chinese.
const CACHE_NOTES: &[(&str, &str, &str, &str)] = &[
    (
        "ci_cache.md",
        "CI 缓存",
        "CI 缓存的目录是 target",
        "CI 缓存按 Cargo.lock 的哈希保存。",
    ),
    (
        "ci_cache_size.md",
        "CI 缓存大小",
        "CI 缓存不能超过 10 GB",
        "超过以后 CI 缓存会被整个删除。",
    ),
    (
        "ci_cache_key.md",
        "CI 缓存键",
        "CI 缓存键包含工具链版本",
        "换工具链以后 CI 缓存失效。",
    ),
];

#[tokio::test]
async fn recall_config_max_files_limits_the_memories_a_turn_surfaces() {
    let p = Project::new();
    p.remember(CACHE_NOTES).await;
    let query = "CI 缓存是怎么配置的？";
    let default = turn(&p.setup(), query).await;
    assert_eq!(default.surfaced.len(), 3, "{default:?}");

    let one = p.setup().recall_config(RecallConfig {
        max_files: 1,
        ..RecallConfig::default()
    });
    let configured = turn(&one, query).await;
    assert_eq!(configured.surfaced.len(), 1, "{configured:?}");
}

#[tokio::test]
async fn recall_config_max_bytes_and_lines_cut_a_surfaced_memory() {
    let p = Project::new();
    let body: String = (1..=30)
        .map(|i| format!("Шаг {i}: проверить журнал развёртывания и откатить релиз.\n"))
        .collect();
    p.remember(&[(
        "rollback.md",
        "откат релиза",
        "как откатить релиз после неудачного развёртывания",
        &body,
    )])
    .await;
    let query = "как откатить релиз?";
    let default = turn(&p.setup(), query).await;
    assert_eq!(default.surfaced, ["rollback.md"], "{default:?}");
    assert!(default.seen.contains("Шаг 30:"), "{}", default.seen);

    let small = p.setup().recall_config(RecallConfig {
        max_bytes: 300,
        ..RecallConfig::default()
    });
    let cut = turn(&small, query).await;
    assert_eq!(cut.surfaced, ["rollback.md"], "{cut:?}");
    assert!(cut.seen.contains("Шаг 1:"), "{}", cut.seen);
    assert!(!cut.seen.contains("Шаг 30:"), "{}", cut.seen);

    let few_lines = p.setup().recall_config(RecallConfig {
        max_lines: 8,
        ..RecallConfig::default()
    });
    let cut = turn(&few_lines, query).await;
    assert!(cut.seen.contains("Шаг 1:"), "{}", cut.seen);
    assert!(!cut.seen.contains("Шаг 10:"), "{}", cut.seen);
}

#[tokio::test]
async fn recall_config_session_budget_stops_surfacing_once_spent() {
    let p = Project::new();
    p.remember(&[
        (
            "deploy.md",
            "deploy days",
            "we deploy on tuesdays only",
            "Deploys happen on Tuesdays, after the standup.",
        ),
        (
            "lunch.md",
            "team lunch",
            "team lunch is on thursdays",
            "Thai food, usually, at the place on the corner.",
        ),
    ])
    .await;
    let queries = ["which day do we deploy?", "when is the team lunch?"];
    let default = turns(&p.setup(), &queries).await;
    assert_eq!(default[0].surfaced, ["deploy.md"], "{default:?}");
    assert_eq!(default[1].surfaced, ["lunch.md"], "{default:?}");

    // Room for the first memory only.
    let tight = p.setup().recall_config(RecallConfig {
        session_budget_bytes: default[0].bytes,
        ..RecallConfig::default()
    });
    let spent = turns(&tight, &queries).await;
    assert_eq!(spent[0].surfaced, ["deploy.md"], "{spent:?}");
    assert!(spent[1].surfaced.is_empty(), "{spent:?}");
    assert_eq!(
        spent[1].skipped,
        ["session recall budget spent"],
        "{spent:?}"
    );
}

#[tokio::test]
async fn recall_config_can_answer_single_word_messages() {
    let p = Project::new();
    p.remember(&[(
        "deploy.md",
        "deploy days",
        "we deploy on tuesdays only",
        "Deploys happen on Tuesdays.",
    )])
    .await;
    let default = turn(&p.setup(), "deploy?").await;
    assert!(default.surfaced.is_empty(), "{default:?}");
    assert_eq!(default.skipped, ["single-word message"]);

    let every = p.setup().recall_config(RecallConfig {
        skip_single_word: false,
        ..RecallConfig::default()
    });
    let answered = turn(&every, "deploy?").await;
    assert_eq!(answered.surfaced, ["deploy.md"], "{answered:?}");
}

/// A trip's summary and a note filed next to it (in Russian), and an unrelated memory at the
/// top: the note shares no word with the question, so only the folder lift surfaces it.
const TRIP: &[(&str, &str, &str, &str)] = &[
    (
        "trip/summary.md",
        "итоги встречи",
        "Итоги: переезд в Берлин назначен на март",
        "Обсудили переезд в Берлин и сроки.",
    ),
    (
        "trip/bike.md",
        "велосипед",
        "Она купила велосипед для города",
        "Красный, с корзиной.",
    ),
    (
        "soup.md",
        "суп",
        "Любимый суп — борщ",
        "Со сметаной и чесноком.",
    ),
];

const TRIP_QUERY: &str = "Когда переезд в Берлин?";

fn lifted() -> Bm25Params {
    Bm25Params {
        dir_weight: 0.5,
        ..Bm25Params::default()
    }
}

#[tokio::test]
async fn bm25_config_folder_lift_surfaces_the_note_filed_with_the_match() {
    let p = Project::new();
    p.remember(TRIP).await;
    let default = turn(&p.setup(), TRIP_QUERY).await;
    assert_eq!(default.surfaced, ["trip/summary.md"], "{default:?}");

    let lift = p.setup().bm25_config(lifted());
    let configured = turn(&lift, TRIP_QUERY).await;
    assert_eq!(
        configured.surfaced,
        ["trip/summary.md", "trip/bike.md"],
        "{configured:?}"
    );
    // The hybrid config's BM25 parameters serve BM25 alone too, when bm25_config is not called.
    let through_hybrid = p.setup().hybrid_config(HybridConfig {
        bm25: lifted(),
        ..HybridConfig::default()
    });
    let configured = turn(&through_hybrid, TRIP_QUERY).await;
    assert_eq!(
        configured.surfaced,
        ["trip/summary.md", "trip/bike.md"],
        "{configured:?}"
    );
}

/// A deterministic stand-in for an embedding model: one dimension for "profession" words, one
/// for "hospital" words, and a small constant (so no vector is zero).
struct Concepts;

#[memloop::async_trait]
impl memloop::core::embed::Embedder for Concepts {
    fn model_id(&self) -> &str {
        "concepts-tuning-test"
    }
    fn dimension(&self) -> usize {
        3
    }
    async fn embed(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, memloop::core::embed::EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let t = t.to_lowercase();
                let has = |ws: &[&str]| ws.iter().any(|w| t.contains(w)) as u8 as f32;
                let mut v = vec![
                    has(&["професси", "медсестр", "работ"]),
                    has(&["больниц", "медсестр"]),
                    0.05,
                ];
                memloop::core::embed::normalize(&mut v);
                v
            })
            .collect())
    }
}

/// An embedding model under which a question is unlike every statement: the dense half ranks
/// nothing, so the hybrid selector's choice is its BM25 half's.
struct Unlike;

#[memloop::async_trait]
impl memloop::core::embed::Embedder for Unlike {
    fn model_id(&self) -> &str {
        "unlike-tuning-test"
    }
    fn dimension(&self) -> usize {
        2
    }
    async fn embed(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, memloop::core::embed::EmbedError> {
        Ok(texts
            .iter()
            .map(|t| match t.contains('?') {
                true => vec![1.0, 0.0],
                false => vec![0.0, 1.0],
            })
            .collect())
    }
}

#[tokio::test]
async fn bm25_config_reaches_the_hybrid_selector() {
    let p = Project::new();
    p.remember(TRIP).await;
    let hybrid = || p.setup().local_model(false).embedder(Arc::new(Unlike));
    let default = turn(&hybrid(), TRIP_QUERY).await;
    assert_eq!(default.surfaced, ["trip/summary.md"], "{default:?}");

    let configured = turn(&hybrid().bm25_config(lifted()), TRIP_QUERY).await;
    assert_eq!(
        configured.surfaced,
        ["trip/summary.md", "trip/bike.md"],
        "{configured:?}"
    );
}

#[tokio::test]
async fn hybrid_config_reaches_the_hybrid_selector() {
    let p = Project::new();
    p.remember(&[
        (
            "nurse.md",
            "Анна",
            "Анна — медсестра в больнице",
            "Смены по ночам.",
        ),
        ("soup.md", "суп", "Любимый суп — борщ", "Со сметаной."),
    ])
    .await;
    // No word in common with the memory: only the vectors find it (similarity about 0.7).
    let query = "какая у неё профессия?";
    let hybrid = || p.setup().local_model(false).embedder(Arc::new(Concepts));
    let default = turn(&hybrid(), query).await;
    assert_eq!(default.surfaced, ["nurse.md"], "{default:?}");

    let strict = hybrid().hybrid_config(HybridConfig {
        min_similarity: 0.9,
        ..HybridConfig::default()
    });
    let configured = turn(&strict, query).await;
    assert!(configured.surfaced.is_empty(), "{configured:?}");
    assert_eq!(
        configured.skipped,
        ["no relevant memories"],
        "{configured:?}"
    );
}

/// A side model that picks the first memory of its manifest.
fn picker() -> ScriptedModel {
    ScriptedModel::new().on_purpose(SELECTOR_PURPOSE, |req| {
        let text: String = req.messages.iter().map(|m| m.text()).collect();
        let first = text
            .lines()
            .find_map(|l| l.split_whitespace().find(|w| w.ends_with(".md")))
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '.' && c != '_'))
            .unwrap_or("none")
            .to_owned();
        Some(ScriptStep::text(
            json!({ "selected_memories": [first] }).to_string(),
        ))
    })
}

/// The manifest lines (memory files) of a selector request.
fn listed(req: &ModelRequest) -> usize {
    let text: String = req.messages.iter().map(|m| m.text()).collect();
    text.lines().filter(|l| l.contains(".md")).count()
}

#[tokio::test]
async fn llm_selector_config_reaches_the_side_model_choosing_alone_and_re_ranking() {
    for rerank in [false, true] {
        let p = Project::new();
        p.remember(CACHE_NOTES).await;
        let query = "CI 缓存是怎么配置的？";
        let side = picker();
        let memory = p.setup().side_model(Arc::new(side.clone())).rerank(rerank);
        let default = turn(&memory, query).await;
        assert_eq!(default.surfaced.len(), 1, "rerank {rerank}: {default:?}");
        let req = side.requests_for(SELECTOR_PURPOSE).pop().unwrap();
        assert_eq!(req.max_tokens, 256);
        assert_eq!(listed(&req), 3, "rerank {rerank}");
        assert_ne!(req.system, ["只选一个。"]);

        let side = picker();
        let memory = p
            .setup()
            .side_model(Arc::new(side.clone()))
            .rerank(rerank)
            .llm_selector_config(LlmSelectorConfig {
                max_tokens: 77,
                manifest_cap: 2,
                system_prompt: "只选一个。".into(),
                ..LlmSelectorConfig::default()
            });
        let configured = turn(&memory, query).await;
        assert_eq!(
            configured.surfaced.len(),
            1,
            "rerank {rerank}: {configured:?}"
        );
        let req = side.requests_for(SELECTOR_PURPOSE).pop().unwrap();
        assert_eq!(req.max_tokens, 77, "rerank {rerank}");
        assert_eq!(req.system, ["只选一个。"], "rerank {rerank}");
        assert_eq!(listed(&req), 2, "rerank {rerank}");
    }
}

/// A side model that never answers (until its call is cancelled).
struct Silent;

#[memloop::async_trait]
impl Model for Silent {
    fn name(&self) -> &str {
        "silent"
    }
    async fn complete(
        &self,
        _req: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        cancel.cancelled().await;
        Err(ModelError::Cancelled)
    }
}

/// The clock is paused: the runtime jumps to the next timer whenever every task waits, so the
/// selector's timeout fires at once, at its configured length, and the test waits for nothing.
#[tokio::test(start_paused = true)]
async fn llm_selector_config_timeout_is_when_the_lexical_fallback_takes_over() {
    let p = Project::new();
    p.remember(CACHE_NOTES).await;
    let query = "CI 缓存是怎么配置的？";
    let memory = p.setup().side_model(Arc::new(Silent));
    let default = turn(&memory, query).await;
    assert_eq!(default.surfaced.len(), 3, "{default:?}");
    assert!(
        default
            .degraded
            .iter()
            .any(|r| r.contains("timed out after 10s")),
        "{default:?}"
    );

    let quick = memory.clone().llm_selector_config(LlmSelectorConfig {
        timeout: Duration::from_millis(1500),
        ..LlmSelectorConfig::default()
    });
    let configured = turn(&quick, query).await;
    assert_eq!(configured.surfaced.len(), 3, "{configured:?}");
    assert!(
        configured
            .degraded
            .iter()
            .any(|r| r.contains("timed out after 1.5s")),
        "{configured:?}"
    );

    // A longer wait than the default is the fallback's too.
    let patient = memory.llm_selector_config(LlmSelectorConfig {
        timeout: Duration::from_secs(20),
        ..LlmSelectorConfig::default()
    });
    let configured = turn(&patient, query).await;
    assert_eq!(configured.surfaced.len(), 3, "{configured:?}");
    assert!(
        configured
            .degraded
            .iter()
            .any(|r| r.contains("timed out after 20s")),
        "{configured:?}"
    );
}

#[tokio::test]
async fn rerank_config_backfills_the_short_list() {
    let p = Project::new();
    p.remember(CACHE_NOTES).await;
    let query = "CI 缓存是怎么配置的？";
    let memory = p.setup().side_model(Arc::new(picker())).rerank(true);
    // This setup's default: the model's pick alone.
    let default = turn(&memory, query).await;
    assert_eq!(default.surfaced.len(), 1, "{default:?}");

    let backfilled = memory.rerank_config(RerankConfig {
        backfill: true,
        ..RerankConfig::default()
    });
    let configured = turn(&backfilled, query).await;
    assert_eq!(configured.surfaced.len(), 3, "{configured:?}");
    assert_eq!(
        configured.surfaced[0], default.surfaced[0],
        "the pick first"
    );
}

/// The requests of `purpose` a model got over `n` turns of an agent attached by `memory`.
async fn background_requests(memory: &MemorySetup, n: usize, purpose: &str) -> Vec<ModelRequest> {
    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("ok")))
        .rule(|_| Some(ScriptStep::text("nothing to do")));
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model.clone())))
        .unwrap()
        .build();
    for i in 0..n {
        agent
            .run_turn(&format!("Wir deployen nur dienstags, Schritt {i}."))
            .await
            .unwrap();
        assert!(agent.drain(Duration::from_secs(60)).await.completed);
    }
    model.requests_for(purpose)
}

#[tokio::test]
async fn extractor_config_reaches_the_forked_extractor() {
    let p = Project::new();
    let memory = p.setup().extraction(true);
    let default = background_requests(&memory, 1, "extractor").await;
    assert_eq!(default.first().unwrap().max_tokens, 4_096);

    let memory = memory.extractor_config(ExtractorConfig {
        max_tokens: 1_234,
        ..ExtractorConfig::default()
    });
    let configured = background_requests(&memory, 1, "extractor").await;
    assert_eq!(configured.first().unwrap().max_tokens, 1_234);
}

#[tokio::test]
async fn scheduler_config_sets_how_often_extraction_runs() {
    let p = Project::new();
    let memory = p.setup().extraction(true);
    let default = background_requests(&memory, 2, "extractor").await;
    assert_eq!(default.len(), 2, "one run per turn");

    let every_other = memory.scheduler_config(SchedulerConfig {
        every_n_turns: 2,
        ..SchedulerConfig::default()
    });
    let configured = background_requests(&every_other, 2, "extractor").await;
    assert_eq!(configured.len(), 1, "one run per two turns");
}

#[tokio::test]
async fn dream_config_sets_the_dream_s_gates() {
    let p = Project::new();
    let memory = p.setup().dream(true);
    // Default: five sessions must have touched memory first.
    let default = background_requests(&memory, 1, "dream").await;
    assert!(default.is_empty(), "{} dream requests", default.len());

    let eager = memory.dream_config(DreamConfig {
        min_sessions: 0,
        ..DreamConfig::default()
    });
    let configured = background_requests(&eager, 1, "dream").await;
    assert!(!configured.is_empty(), "the dream ran");
}

/// Reports one saved memory per run, as a real extractor would after writing it.
struct Reports;

#[memloop::async_trait]
impl memloop::Extractor for Reports {
    async fn extract(
        &self,
        _ctx: &memloop::memory::extract::ExtractionContext,
    ) -> Result<Vec<memloop::memory::store::MemoryPath>, memloop::memory::extract::ExtractError>
    {
        Ok(vec![memloop::memory::store::MemoryPath::new(
            "feedback_tests.md",
        )?])
    }
}

/// Whether the second user message carries the saved-memories notice.
async fn noticed(memory: MemorySetup) -> bool {
    let memory = memory.extraction(true).extractor(Arc::new(Reports));
    let model = ScriptedModel::new().rule(|_| Some(ScriptStep::text("ok")));
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model.clone())))
        .unwrap()
        .build();
    agent.run_turn("первый").await.unwrap();
    assert!(agent.drain(Duration::from_secs(60)).await.completed);
    agent.run_turn("второй").await.unwrap();
    let last = model.requests_for("main").pop().unwrap();
    let seen: String = last.messages.iter().map(|m| m.text()).collect();
    seen.contains("Memory saved: feedback_tests.md")
}

#[tokio::test]
async fn saved_notice_and_scheduler_config_set_one_field_the_later_call_wins() {
    let p = Project::new();
    assert!(!noticed(p.setup()).await, "off by default");
    assert!(noticed(p.setup().saved_notice(true)).await);
    let on_then_replaced = p
        .setup()
        .saved_notice(true)
        .scheduler_config(SchedulerConfig::default());
    assert!(!noticed(on_then_replaced).await);
    let config_then_on = p
        .setup()
        .scheduler_config(SchedulerConfig::default())
        .saved_notice(true);
    assert!(noticed(config_then_on).await);
    let through_config = p.setup().scheduler_config(SchedulerConfig {
        notice_in_conversation: true,
        ..SchedulerConfig::default()
    });
    assert!(noticed(through_config).await);
}
