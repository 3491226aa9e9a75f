//! End-to-end run against any OpenAI-compatible server (opt-in; not part of the test suite).
//!
//! ```text
//! shared/tools/local-llm.sh start 8089        # llama.cpp + a tiny real model on loopback
//! OPENAI_BASE_URL=http://127.0.0.1:8089/v1 OPENAI_MODEL=local \
//!   cargo run --features providers --example e2e_openai
//! ```
//!
//! It runs, against the real server: a non-streamed and a streamed call, the LLM selector's
//! structured output, the full agent with memory (recall, extraction and session-notes forks,
//! compaction), a turn too long for the server's window (the context error and the recovery),
//! and whatever nonsense the model answers. It checks that nothing crashed, that the stored
//! conversation and every memory file are valid, and that every failure arrived as a typed
//! event; it exits non-zero otherwise. `E2E_MAX_TOKENS` caps every answer (default 24).
#![allow(clippy::print_stdout)]

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use memloop::MemorySetup;
use memloop::compact::CompactConfig;
use memloop::core::events::{AgentEvent, VecSink};
use memloop::core::invariants::check_invariants;
use memloop::core::message::Message;
use memloop::core::model::{Model, ModelRequest, StreamEvent};
use memloop::core::window::{ContextWindow, DEFAULT_CONTEXT_WINDOW};
use memloop::core::{Agent, AgentConfig, CancellationToken, prompt::StaticSection};
use memloop::host::env::EnvVars;
use memloop::memory::MemoryEvent;
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::recall::{Bm25Selector, FallbackSelector, LlmSelector};
use memloop::memory::recall::{parse_selection, selection_schema};
use memloop::memory::session_notes::NotesEvent;
use memloop::providers::{OpenAiCompatModel, OpenAiConfig, RetryPolicy};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<()> {
    if std::env::var("OPENAI_BASE_URL").is_err() {
        bail!("set OPENAI_BASE_URL to an OpenAI-compatible server (e.g. http://127.0.0.1:8089/v1)");
    }
    let max_tokens: u32 = std::env::var("E2E_MAX_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let mut config = OpenAiConfig::from_env()?;
    config.timeout = Some(Duration::from_secs(600));
    config.retry = RetryPolicy {
        max_attempts: 2,
        ..RetryPolicy::default()
    };
    let openai = OpenAiCompatModel::new(config)?;
    let mut problems: Vec<String> = Vec::new();

    // ── The server's window ──
    let reported = openai.context_window().await;
    println!("context window reported by the server: {reported:?}");
    let model: Arc<dyn Model> = Arc::new(openai);

    // ── One non-streamed and one streamed call ──
    let mut req = ModelRequest::new("main", vec![Message::user("Say hello in three words.")]);
    req.max_tokens = max_tokens;
    let t = Instant::now();
    match model.complete(req.clone(), CancellationToken::new()).await {
        Ok(r) => println!(
            "complete: {:?} ({:?}, {} in / {} out tokens, {:.1}s)",
            r.text_content(),
            r.stop_reason,
            r.usage.input_tokens,
            r.usage.output_tokens,
            t.elapsed().as_secs_f64()
        ),
        Err(e) => problems.push(format!("non-streamed call failed: {e}")),
    }
    let t = Instant::now();
    let mut deltas = 0;
    let mut stream = model.stream(req, CancellationToken::new());
    let mut finished = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(StreamEvent::TextDelta { .. }) => deltas += 1,
            Ok(StreamEvent::Finished(r)) => finished = Some(r),
            Ok(_) => {}
            Err(e) => problems.push(format!("streamed call failed: {e}")),
        }
    }
    drop(stream);
    match finished {
        Some(r) => println!(
            "stream: {deltas} text deltas, {:?} ({:.1}s)",
            r.text_content(),
            t.elapsed().as_secs_f64()
        ),
        None => problems.push("the stream ended without a response".into()),
    }

    // ── The selector's structured output ──
    let mut req = ModelRequest::new(
        "memory_selector",
        vec![Message::user(
            "Query: how do I run the tests?\nMemories:\n- testing.md: how to run the tests\n- style.md: code style\nAnswer with the relevant file names.",
        )],
    );
    req.response_schema = Some(selection_schema());
    req.max_tokens = max_tokens.max(32);
    match model.complete(req, CancellationToken::new()).await {
        Ok(r) => {
            let text = r.text_content();
            match parse_selection(&text) {
                Some(names) => println!("selector: valid structured output {names:?}"),
                None => println!("selector: unusable answer {text:?} (recall falls back to BM25)"),
            }
        }
        Err(e) => println!("selector: typed error {e} (recall falls back to BM25)"),
    }

    // ── The full agent with memory ──
    let home = tempfile::tempdir()?;
    let project = tempfile::tempdir()?;
    let env = EnvVars::from_process().with("MEMLOOP_HOME", home.path().display().to_string());
    let mut memory = MemorySetup::with_resolver(MemoryDirResolver::new(project.path()), env)?;
    let store = memory
        .store()
        .cloned()
        .context("memory is switched off (MEMLOOP_DISABLE_AUTO_MEMORY)")?;
    let bm25 = Arc::new(Bm25Selector::new(store.clone()));
    let llm = Arc::new(LlmSelector::new(model.clone()));
    memory = memory.selector(Arc::new(FallbackSelector::new(
        llm,
        bm25,
        Duration::from_secs(120),
    )));
    // The first session plans with the default window, as with a server that reports none, so
    // the oversized turn reaches the server and its context error is what teaches the window.
    let window = ContextWindow::new(DEFAULT_CONTEXT_WINDOW);
    let compact = CompactConfig::for_model(window.tokens(), u64::from(max_tokens));
    let notes = memory
        .default_notes_config()
        .context("memory is switched off")?;
    memory = memory.compaction(compact, notes);
    let sink = VecSink::default();
    let builder = Agent::builder(model.clone())
        .context_window(window.clone())
        .config(AgentConfig {
            cwd: project.path().to_path_buf(),
            max_tokens,
            max_iterations: 3,
            ..AgentConfig::default()
        })
        .events(Arc::new(sink.clone()))
        .section(Arc::new(StaticSection::new("persona", "Be brief.")));
    let mut agent = memory.attach(builder)?.build();
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(400);
    let turns = [
        "I prefer tabs over spaces. Remember that.",
        "What do I prefer?",
        long.as_str(),
        "Still there? Answer in one word.",
    ];
    for text in turns {
        let t = Instant::now();
        let shown: String = text.chars().take(60).collect();
        match agent.run_turn(text).await {
            Ok(out) => println!(
                "turn {shown:?}: {:?} ({} call(s), {:.1}s)",
                out.text.chars().take(120).collect::<String>(),
                out.iterations,
                t.elapsed().as_secs_f64()
            ),
            Err(e) => println!(
                "turn {shown:?}: typed error: {e} ({:.1}s)",
                t.elapsed().as_secs_f64()
            ),
        }
        let report = agent.drain(Duration::from_secs(900)).await;
        if !report.completed {
            problems.push(format!("background work did not finish: {report}"));
        }
    }

    println!("window after the session: {} tokens", window.tokens());
    if let Err(e) = check_invariants(agent.messages()) {
        problems.push(format!("the stored conversation is invalid: {e:?}"));
    }

    // ── Recovery: a new session planned with the server's window ──
    let window = ContextWindow::new(reported.unwrap_or(window.tokens()));
    let builder = Agent::builder(model.clone())
        .context_window(window)
        .config(AgentConfig {
            cwd: project.path().to_path_buf(),
            max_tokens,
            max_iterations: 3,
            ..AgentConfig::default()
        })
        .events(Arc::new(sink.clone()))
        .section(Arc::new(StaticSection::new("persona", "Be brief.")));
    let mut agent = memory.attach(builder)?.build();
    match agent.run_turn("Still there? Answer in one word.").await {
        Ok(out) => println!(
            "new session: {:?}",
            out.text.chars().take(120).collect::<String>()
        ),
        Err(e) => problems.push(format!("the new session failed too: {e}")),
    }
    agent.drain(Duration::from_secs(900)).await;

    // ── What happened ──
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for e in sink.events() {
        // An extension event (memory, recall, notes) is counted under its own name.
        let kind = serde_json::to_value(&e)
            .ok()
            .and_then(|v| {
                let v = if v["event"] == "extension" {
                    &v["data"]
                } else {
                    &v
                };
                v["event"].as_str().map(str::to_owned)
            })
            .unwrap_or_else(|| "?".into());
        let memory = matches!(
            e.extension::<MemoryEvent>(),
            Some(MemoryEvent::ExtractionFailed { .. } | MemoryEvent::MemoriesSaved { .. })
        ) || e.extension::<NotesEvent>().is_some();
        if memory {
            println!("  event: {e:?}");
        }
        *kinds.entry(kind).or_default() += 1;
        match e {
            AgentEvent::TurnFailed { .. }
            | AgentEvent::CompactionFailed { .. }
            | AgentEvent::ForkSkipped { .. }
            | AgentEvent::ContextWindowLearned { .. }
            | AgentEvent::Compacted { .. }
            | AgentEvent::Warning { .. } => println!("  event: {e:?}"),
            _ => {}
        }
    }
    println!("events by kind: {kinds:?}");
    if let Err(e) = check_invariants(agent.messages()) {
        problems.push(format!("the stored conversation is invalid: {e:?}"));
    }
    // Every file the store lists parsed (frontmatter, name, description).
    let headers = store.scan().await.context("scanning the memory dir")?;
    println!("memory files: {}", headers.len());
    for h in &headers {
        println!("  {} ({:?})", h.rel_path, h.description);
    }
    if problems.is_empty() {
        println!("E2E OK: nothing crashed, everything stored is valid, failures were typed");
        Ok(())
    } else {
        for p in &problems {
            println!("PROBLEM: {p}");
        }
        bail!("{} problem(s)", problems.len())
    }
}
