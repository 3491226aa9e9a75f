//! The loop's spans follow OpenTelemetry's GenAI conventions: one `invoke_agent` span per agent,
//! a `turn` span per turn under it, one `chat {model}` span per model request the (scripted,
//! and it says so) model answered, one `execute_tool {tool}` span per tool call, with the
//! conventions' attributes and no message text. Captured by a real `tracing` subscriber layer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use memloop::core::model::ModelError;
use memloop::core::{Agent, message::Usage};
use memloop::testkit::{Echo, ScriptStep, ScriptedModel};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// One span as the layer saw it: its name, its fields, and its parent's index.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<Seen>>>,
    /// Open spans: subscriber id → index in `spans` (ids are reused once a span closes).
    open: Arc<Mutex<HashMap<u64, usize>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent_id = ctx
            .span(id)
            .and_then(|s| s.parent().map(|p| p.id().into_u64()));
        let mut open = self.open.lock().unwrap();
        let parent = parent_id.and_then(|p| open.get(&p).copied());
        let mut spans = self.spans.lock().unwrap();
        spans.push(Seen {
            name: attrs.metadata().name().to_owned(),
            parent,
            fields,
        });
        open.insert(id.into_u64(), spans.len() - 1);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let open = self.open.lock().unwrap();
        if let Some(&i) = open.get(&id.into_u64()) {
            values.record(&mut Fields(&mut self.spans.lock().unwrap()[i].fields));
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        self.open.lock().unwrap().remove(&id.into_u64());
    }
}

const PROMPT: &str = "Quelle est la capitale ? 秘密の質問";

#[tokio::test]
async fn a_turn_is_traced_with_the_genai_conventions() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let usage = Usage {
        input_tokens: 120,
        output_tokens: 7,
        cache_read_input_tokens: 100,
        cache_creation_input_tokens: 20,
    };
    let model = ScriptedModel::new().on_purpose("main", move |req| {
        let answered = req
            .messages
            .last()
            .is_some_and(|m| m.tool_result_ids().next().is_some());
        Some(match answered {
            false => ScriptStep::tool("echo", json!({"q": 1})).with_usage(usage),
            true => ScriptStep::text("Paris.").with_usage(usage),
        })
    });
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(Arc::new(Echo))
        .build();
    agent.run_turn(PROMPT).await.unwrap();
    let session = agent.config().session_id.clone();
    let call_id = agent
        .messages()
        .iter()
        .find_map(|m| m.tool_uses().next().map(|(id, _, _)| id.to_owned()))
        .unwrap();
    drop(agent);

    let spans = capture.spans.lock().unwrap().clone();
    let index = |name: &str| -> Vec<usize> {
        spans
            .iter()
            .enumerate()
            .filter(|(_, s)| s.name == name)
            .map(|(i, _)| i)
            .collect()
    };
    let run = index("invoke_agent");
    assert_eq!(run.len(), 1, "{spans:#?}");
    let run = &spans[run[0]];
    assert_eq!(run.fields["otel.name"], "invoke_agent main");
    assert_eq!(run.fields["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(run.fields["gen_ai.conversation.id"], session);

    let turns = index("turn");
    assert_eq!(turns.len(), 1);
    assert_eq!(spans[turns[0]].parent, Some(index("invoke_agent")[0]));

    // One chat span per request the model answered, under the turn.
    let chats = index("chat");
    assert_eq!(chats.len(), model.requests_for("main").len());
    assert_eq!(chats.len(), 2);
    for (i, &c) in chats.iter().enumerate() {
        let chat = &spans[c];
        assert_eq!(chat.parent, Some(turns[0]), "{chat:#?}");
        let f = &chat.fields;
        assert_eq!(f["otel.name"], "chat scripted");
        assert_eq!(f["otel.kind"], "client");
        assert_eq!(f["gen_ai.operation.name"], "chat");
        assert_eq!(f["gen_ai.provider.name"], "memloop.scripted");
        assert_eq!(f["gen_ai.request.model"], "scripted");
        assert_eq!(f["gen_ai.usage.input_tokens"], "120");
        assert_eq!(f["gen_ai.usage.output_tokens"], "7");
        assert_eq!(f["gen_ai.usage.cache_read.input_tokens"], "100");
        assert_eq!(f["gen_ai.usage.cache_creation.input_tokens"], "20");
        assert_eq!(f["memloop.purpose"], "main");
        assert!(f.contains_key("gen_ai.request.max_tokens"));
        let reason = if i == 0 { "tool_calls" } else { "stop" };
        assert_eq!(
            f["gen_ai.response.finish_reasons"],
            format!("[\"{reason}\"]")
        );
        assert!(!f.contains_key("error.type"));
    }

    // One tool span, under the turn.
    let tools = index("execute_tool");
    assert_eq!(tools.len(), 1);
    let tool = &spans[tools[0]];
    assert_eq!(tool.parent, Some(turns[0]));
    assert_eq!(tool.fields["otel.name"], "execute_tool echo");
    assert_eq!(tool.fields["gen_ai.tool.name"], "echo");
    assert_eq!(tool.fields["gen_ai.tool.call.id"], call_id);

    // No message text in any span.
    for s in &spans {
        for v in s.fields.values() {
            assert!(!v.contains("capitale") && !v.contains("Paris"), "{s:#?}");
        }
    }
}

#[tokio::test]
async fn a_failed_model_request_carries_its_error_type() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let model = ScriptedModel::new().on_purpose("main", |_| {
        Some(ScriptStep::Fail(ModelError::Auth("bad key".into())))
    });
    let mut agent = Agent::builder(Arc::new(model.clone())).build();
    assert!(agent.run_turn(PROMPT).await.is_err());
    drop(agent);
    let spans = capture.spans.lock().unwrap().clone();
    let failed: Vec<&Seen> = spans.iter().filter(|s| s.name == "chat").collect();
    assert_eq!(failed.len(), model.requests_for("main").len());
    assert!(!failed.is_empty());
    for chat in failed {
        assert_eq!(chat.fields["error.type"], "auth", "{chat:#?}");
        assert_eq!(chat.fields["otel.status_code"], "ERROR");
        assert!(!chat.fields.contains_key("gen_ai.usage.input_tokens"));
    }
}

/// The memory the recall tests look for: `release_day.md`.
async fn write_release_day(store: &dyn memloop::MemoryStore) {
    use memloop::memory::store::{MemoryDoc, MemoryType, WriteMode};
    let doc = MemoryDoc::new(
        "Release day",
        "the team ships releases on tuesdays",
        MemoryType::Project,
        "Releases go out on Tuesdays after the freeze.",
    );
    store
        .write("release_day.md", &doc, WriteMode::Overwrite)
        .await
        .unwrap();
}

/// With memory on, recall and extraction have spans of their own under the turn's agent:
/// what recall surfaced (paths and bytes, never text), and what the extraction read and saved.
#[tokio::test]
async fn recall_and_extraction_are_traced_with_paths_and_counts() {
    use memloop::MemorySetup;
    use memloop::host::env::EnvVars;
    use memloop::memory::paths::MemoryDirResolver;

    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env)
        .unwrap()
        .without_compaction();
    let store = memory.store().unwrap().clone();
    write_release_day(store.as_ref()).await;
    let model = ScriptedModel::new()
        .on_purpose("main", |_| Some(ScriptStep::text("On Tuesday.")))
        .on_purpose("extractor", |req| {
            // First a write the store refuses (a credential), then nothing more.
            let answered = req
                .messages
                .last()
                .is_some_and(|m| m.tool_result_ids().next().is_some());
            Some(match answered {
                false => ScriptStep::tool(
                    "memory_write",
                    json!({"topic": "project_staging_db", "type": "project",
                           "name": "Staging DB", "description": "how to reach the staging database",
                           "content": "password: Qw7zLp2Vn9xK"}),
                ),
                true => ScriptStep::text("Nothing else to save."),
            })
        });
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model.clone())))
        .unwrap()
        .build();
    agent
        .run_turn("when do releases ship? tuesdays?")
        .await
        .unwrap();
    assert!(
        agent
            .drain(std::time::Duration::from_secs(30))
            .await
            .completed
    );
    drop(agent);

    let spans = capture.spans.lock().unwrap().clone();
    // The scripted model answers at once, before recall settles: that turn's recall is
    // cancelled. Recall on its own, awaited, shows what its span records.
    let hook = memloop::memory::recall::RecallHook::new(
        store.clone(),
        Arc::new(memloop::memory::recall::Bm25Selector::new(store.clone())),
    );
    let ctx = memloop::testkit::hook_context(Arc::new(model.clone()), vec![]);
    let pending =
        memloop::core::Hook::on_turn_start(&hook, &ctx, "when do releases ship? tuesdays?")
            .await
            .unwrap();
    assert!(pending.wait().await.is_some());
    let after = capture.spans.lock().unwrap().clone();
    let recall: Vec<&Seen> = after.iter().filter(|s| s.name == "recall").collect();
    let f = &recall.last().unwrap().fields;
    assert_eq!(f["memloop.recall.candidates"], "1", "{f:?}");
    assert_eq!(f["memloop.recall.surfaced"], "release_day.md");
    assert!(f["memloop.recall.bytes"].parse::<u64>().unwrap() > 0);
    // In the session, recall's span sits under the turn.
    let turn = spans.iter().position(|s| s.name == "turn").unwrap();
    let in_turn = spans.iter().find(|s| s.name == "recall").unwrap();
    assert_eq!(in_turn.parent, Some(turn));

    let extract: Vec<&Seen> = spans.iter().filter(|s| s.name == "extract").collect();
    assert_eq!(extract.len(), 1, "{spans:#?}");
    assert_eq!(extract[0].fields["memloop.extract.saved"], "0");
    assert_eq!(
        extract[0].fields["memloop.extract.refused"], "1",
        "{extract:#?}"
    );
    assert_eq!(extract[0].fields["memloop.extract.messages"], "2");
    // The extractor's model request nests under the extraction.
    let extract_at = spans.iter().position(|s| s.name == "extract").unwrap();
    let fork_chat = spans
        .iter()
        .filter(|s| {
            s.name == "chat"
                && s.fields.get("memloop.purpose").map(String::as_str) == Some("extractor")
        })
        .count();
    assert_eq!(fork_chat, model.requests_for("extractor").len());
    assert!(
        spans
            .iter()
            .enumerate()
            .any(|(i, s)| s.name == "fork" && s.parent == Some(extract_at) && i > extract_at),
        "{spans:#?}"
    );
    // The dream ran its gates at the end of the turn: its span says which one stopped it.
    let dream: Vec<&Seen> = spans.iter().filter(|s| s.name == "dream").collect();
    assert_eq!(dream.len(), 1, "{spans:#?}");
    assert!(
        dream[0].fields.contains_key("memloop.dream.skipped"),
        "{dream:#?}"
    );
    for s in &spans {
        for v in s.fields.values() {
            assert!(!v.contains("freeze"), "memory text in a span: {s:#?}");
            assert!(!v.contains("Qw7zLp2Vn9xK"), "a secret in a span: {s:#?}");
        }
    }
}

/// An embedder with a fixed answer, or a failure.
struct Vectors(bool);

#[async_trait]
impl memloop::core::embed::Embedder for Vectors {
    fn model_id(&self) -> &str {
        "fixed-model"
    }
    fn dimension(&self) -> usize {
        2
    }
    fn provider(&self) -> &str {
        "test.fixed"
    }
    async fn embed(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, memloop::core::embed::EmbedError> {
        match self.0 {
            true => Ok(texts.iter().map(|_| vec![0.6, 0.8]).collect()),
            false => Err(memloop::core::embed::EmbedError::Load("no weights".into())),
        }
    }
}

#[tokio::test]
async fn each_embedding_call_is_an_embeddings_span_without_the_texts() {
    use memloop::core::embed::Embedder;
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let texts: Vec<String> = ["第一条记忆", "second memory", "третья"]
        .map(String::from)
        .to_vec();
    let good: &dyn Embedder = &Vectors(true);
    good.embed_checked(&texts).await.unwrap();
    good.embed_queries_checked(&texts[..1]).await.unwrap();
    let bad: &dyn Embedder = &Vectors(false);
    assert!(bad.embed_checked(&texts).await.is_err());

    let spans = capture.spans.lock().unwrap().clone();
    let calls: Vec<&Seen> = spans.iter().filter(|s| s.name == "embeddings").collect();
    assert_eq!(calls.len(), 3, "{spans:#?}");
    for call in &calls {
        assert_eq!(call.fields["otel.name"], "embeddings fixed-model");
        assert_eq!(call.fields["gen_ai.operation.name"], "embeddings");
        assert_eq!(call.fields["gen_ai.provider.name"], "test.fixed");
        assert_eq!(call.fields["otel.kind"], "client");
    }
    assert_eq!(calls[0].fields["memloop.texts"], "3");
    assert_eq!(calls[0].fields["memloop.role"], "passage");
    assert_eq!(calls[1].fields["memloop.role"], "query");
    assert!(!calls[0].fields.contains_key("error.type"));
    assert_eq!(calls[2].fields["error.type"], "load");
    assert_eq!(calls[2].fields["otel.status_code"], "ERROR");
    let all = format!("{spans:?}");
    assert!(!all.contains("第一条记忆") && !all.contains("second memory"));
}

/// A stop hook that forks a note-taker, as the extractor does.
struct ForkOnStop;

#[async_trait]
impl memloop::core::Hook for ForkOnStop {
    async fn on_stop(&self, ctx: memloop::core::HookContext) {
        ctx.fork("noter")
            .build()
            .run("Note what the user asked.")
            .await
            .unwrap();
    }
}

/// Content capture is the agent's, not one request path's: a host that turns it on sees the
/// content of its forks' and sub-agents' model requests too, through the same filter, and a host
/// that leaves it off sees none anywhere.
#[tokio::test]
async fn content_capture_covers_forks_and_sub_agents() {
    use memloop::core::telemetry::ContentCapture;
    use memloop::subagents::{AgentDefinition, SubAgentTool, SubAgents};

    for on in [true, false] {
        let capture = Capture::default();
        let subscriber = tracing_subscriber::registry().with(capture.clone());
        let _guard = tracing::subscriber::set_default(subscriber);

        let model = ScriptedModel::new()
            .on_purpose("subagent:counter", |_| {
                Some(ScriptStep::text("There are 3 files, said the counter."))
            })
            .on_purpose("noter", |_| {
                Some(ScriptStep::text("The user counted files."))
            })
            .then(ScriptStep::tool(
                "agent",
                json!({"agent": "counter", "prompt": "Count the files in hush-7."}),
            ))
            .then(ScriptStep::text("3 files."));
        let counter = AgentDefinition::new("counter", "Counts files.", "You count files.");
        let mut builder = Agent::builder(Arc::new(model.clone()))
            .subagents(Arc::new(SubAgentTool::new([counter])))
            .hook(Arc::new(ForkOnStop));
        if on {
            builder = builder.capture_content(ContentCapture::new(|t| t.replace("hush-7", "[R]")));
        }
        let mut agent = builder.build();
        agent.run_turn("How many files in hush-7?").await.unwrap();
        assert!(
            agent
                .drain(std::time::Duration::from_secs(30))
                .await
                .completed
        );
        drop(agent);
        assert_eq!(model.requests_for("noter").len(), 1);

        let spans = capture.spans.lock().unwrap().clone();
        let chat = |purpose: &str| -> Vec<BTreeMap<String, String>> {
            spans
                .iter()
                .filter(|s| s.name == "chat" && s.fields["memloop.purpose"] == purpose)
                .map(|s| s.fields.clone())
                .collect()
        };
        for purpose in ["main", "subagent:counter", "noter"] {
            let seen = chat(purpose);
            assert!(!seen.is_empty(), "no chat span for {purpose}: {spans:#?}");
            for f in seen {
                assert_eq!(
                    f.contains_key("gen_ai.input.messages"),
                    on,
                    "{purpose}: {f:#?}"
                );
                assert_eq!(f.contains_key("gen_ai.output.messages"), on, "{purpose}");
                for v in f.values() {
                    assert!(!v.contains("hush-7"), "{purpose}: unfiltered content {v}");
                }
            }
        }
        if on {
            let child = &chat("subagent:counter")[0];
            assert!(child["gen_ai.input.messages"].contains("Count the files in [R]"));
            assert!(child["gen_ai.output.messages"].contains("said the counter"));
            let fork = &chat("noter")[0];
            assert!(fork["gen_ai.input.messages"].contains("Note what the user asked"));
            assert!(fork["gen_ai.output.messages"].contains("The user counted files"));
        }
    }
}

/// An embedder that always fails, as a model server that went down does.
struct Down;

#[async_trait]
impl memloop::core::embed::Embedder for Down {
    fn model_id(&self) -> &str {
        "down-v1"
    }
    fn dimension(&self) -> usize {
        4
    }
    async fn embed(
        &self,
        _texts: &[String],
    ) -> Result<Vec<Vec<f32>>, memloop::core::embed::EmbedError> {
        Err(memloop::core::embed::EmbedError::Inference(
            "the model server is down".into(),
        ))
    }
}

/// The recall span names its selector, and when the selector had to choose with part of its
/// ranking (a hybrid selector whose embedder failed), it says so and why.
#[tokio::test]
async fn the_recall_span_names_its_selector_and_why_it_degraded() {
    use memloop::MemoryStore;
    use memloop::memory::files::FileMemoryStore;
    use memloop::memory::recall::{HybridSelector, RecallHook};

    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(dir.path()).unwrap());
    write_release_day(store.as_ref()).await;
    let cache = dir.path().join("vectors");
    let hybrid = HybridSelector::new(store.clone(), Arc::new(Down), cache);
    let hook = RecallHook::new(store.clone(), Arc::new(hybrid));
    let ctx = memloop::testkit::hook_context(Arc::new(ScriptedModel::new()), vec![]);
    let pending = memloop::core::Hook::on_turn_start(&hook, &ctx, "when do releases ship?")
        .await
        .unwrap();
    assert!(
        pending.wait().await.is_some(),
        "BM25 alone still surfaces it"
    );

    let spans = capture.spans.lock().unwrap().clone();
    let recall = spans.iter().rfind(|s| s.name == "recall").unwrap();
    assert_eq!(recall.fields["memloop.recall.selector"], "hybrid");
    let degraded = &recall.fields["memloop.recall.degraded"];
    assert!(
        degraded.starts_with("hybrid: ") && degraded.contains("the model server is down"),
        "{recall:#?}"
    );
    assert_eq!(recall.fields["memloop.recall.surfaced"], "release_day.md");
}
