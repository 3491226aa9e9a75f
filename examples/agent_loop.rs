//! The memloop demo: three sessions of one project, showing memory across sessions and compaction.
//!
//! By default the model is a `ScriptedModel`: its answers are canned (offline, no API key,
//! deterministic) and the demo says so. Everything else is real: the agent loop, tools, the memory
//! dir on disk, the background extractor, recall, session notes and compaction.
//!
//! ```text
//! cargo run --example agent_loop                        # offline, scripted
//! cargo run --example agent_loop -- --home /tmp/ml      # keep the memory dir afterwards
//! cargo run --example agent_loop --features providers -- --provider anthropic --model claude-sonnet-4-5
//! ```
#![allow(clippy::print_stdout)]

#[path = "support/demo_script.rs"]
mod demo_script;
#[path = "support/print.rs"]
mod print;

use anyhow::{Context, Result, bail};
use memloop::compact::{CompactConfig, Compactor, SessionMemoryCompactConfig};
use memloop::core::tools::ReadFile;
use memloop::core::{Agent, AgentBuilder, AgentConfig, Model};
use memloop::memory::dream::DreamHook;
use memloop::memory::extract::{ExtractionScheduler, ForkedExtractor};
use memloop::memory::recall::{Bm25Selector, FallbackSelector, LlmSelector, RecallHook, Selector};
use memloop::memory::session_memory::{
    FileSessionMemory, SessionMemoryConfig, SessionMemoryHook, UpdateThresholds,
};
use memloop::memory::{
    EnvVars, FileMemoryStore, MemoryDirResolver, MemorySection, MemoryStore, memory_tools,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

struct Args {
    provider: Option<String>,
    model: Option<String>,
    home: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        provider: None,
        model: None,
        home: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--provider" => args.provider = Some(it.next().context("--provider needs a value")?),
            "--model" => args.model = Some(it.next().context("--model needs a value")?),
            "--home" => args.home = Some(it.next().context("--home needs a value")?.into()),
            "-h" | "--help" => {
                println!(
                    "usage: agent_loop [--provider anthropic|openai] [--model NAME] [--home DIR]"
                );
                std::process::exit(0);
            }
            other => bail!("unknown argument `{other}` (try --help)"),
        }
    }
    Ok(args)
}

#[cfg(feature = "providers")]
fn real_model(provider: &str, model: Option<&str>) -> Result<Arc<dyn Model>> {
    Ok(memloop::core::providers::from_env(provider, model)?)
}

#[cfg(not(feature = "providers"))]
fn real_model(_provider: &str, _model: Option<&str>) -> Result<Arc<dyn Model>> {
    bail!("this build has no HTTP providers: run with `--features providers`")
}

/// Everything one session of the demo shares with the others.
struct Project {
    store: Arc<dyn MemoryStore>,
    project_dir: PathBuf,
    base: PathBuf,
    cwd: PathBuf,
}

impl Project {
    /// An agent with memory wired in: tools, the memory section, recall, extraction, dream.
    fn agent(
        &self,
        model: Arc<dyn Model>,
        selector: Arc<dyn Selector>,
        session: &str,
    ) -> AgentBuilder {
        let mut builder = Agent::builder(model)
            .config(AgentConfig {
                session_id: session.into(),
                cwd: self.cwd.clone(),
                ..AgentConfig::default()
            })
            .events(Arc::new(print::event))
            .section(Arc::new(memloop::core::StaticSection::new(
                "persona",
                "You are a concise coding agent working in the memloop repository.",
            )))
            .section(Arc::new(MemorySection::new(self.store.clone())))
            .tool(Arc::new(ReadFile::default()))
            .turn_start_hook(Arc::new(RecallHook::new(self.store.clone(), selector)))
            .stop_hook(Arc::new(ExtractionScheduler::new(
                self.store.clone(),
                Arc::new(ForkedExtractor::new(self.store.clone())),
            )))
            .stop_hook(Arc::new(DreamHook::new(self.store.clone())));
        for tool in memory_tools(self.store.clone()) {
            builder = builder.tool(tool);
        }
        builder
    }

    /// Session notes + compaction for a context window of `window` tokens.
    fn with_compaction(
        &self,
        builder: AgentBuilder,
        session: &str,
        window: u64,
        small: bool,
    ) -> Result<AgentBuilder> {
        let mut sm = SessionMemoryConfig::new(&self.project_dir).with_config_home(&self.base);
        let mut cc = CompactConfig::for_model(window, 2_000);
        if small {
            // A tiny window so the scripted session crosses it in a few turns.
            sm.thresholds = UpdateThresholds {
                init_tokens: 1_500,
                min_tokens_between_updates: 800,
                tool_calls_between_updates: 2,
            };
            cc.warning_buffer = 3_000;
            cc.session_memory = SessionMemoryCompactConfig {
                min_tokens: 800,
                min_text_messages: 2,
                max_tokens: 2_500,
                ..Default::default()
            };
        }
        let notes = Arc::new(FileSessionMemory::new(sm, session)?);
        let hook = Arc::new(SessionMemoryHook::new(notes.clone()));
        Ok(builder
            .post_sampling_hook(hook.clone())
            .compaction_listener(hook)
            .compactor(Arc::new(Compactor::new(cc).with_session_memory(notes))))
    }
}

async fn turn(agent: &mut Agent, text: &str) -> Result<()> {
    println!("\nuser › {text}");
    agent.run_turn(text).await?;
    // Wait for background work (extraction, notes) so the demo's output stays in order.
    let report = agent.drain(Duration::from_secs(60)).await;
    if !report.completed {
        println!("  (background work still running: {report})");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let tmp = tempfile::tempdir()?;
    let base = args
        .home
        .clone()
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let cwd = std::env::current_dir()?;
    let real = match &args.provider {
        Some(p) => Some(real_model(p, args.model.as_deref())?),
        None => None,
    };
    match &real {
        Some(m) => println!("memloop demo with a real model: {}", m.name()),
        None => println!(
            "memloop demo. The model is SCRIPTED: canned answers, offline and deterministic.\n\
             Everything else (loop, tools, memory dir on disk, extractor, recall, notes, compaction) is real."
        ),
    }

    let env = EnvVars::from_process().with("MEMLOOP_HOME", base.display().to_string());
    let resolver = MemoryDirResolver::new(&cwd).env(env);
    let resolved = resolver.resolve()?;
    println!(
        "\nmemory dir: {}\n  chosen by: {}",
        resolved.dir.display(),
        resolved.reason
    );
    let project = Project {
        store: Arc::new(FileMemoryStore::open_resolved(&resolved)?),
        project_dir: resolver.project_dir()?,
        base: base.clone(),
        cwd,
    };
    let selector_for = |model: &Arc<dyn Model>| -> Arc<dyn Selector> {
        let bm25: Arc<dyn Selector> = Arc::new(Bm25Selector::new(project.store.clone()));
        match &real {
            // With a real model: the LLM picks, BM25 takes over on error or timeout.
            Some(_) => Arc::new(FallbackSelector::new(
                Arc::new(LlmSelector::new(model.clone())),
                bm25,
                Duration::from_secs(10),
            )),
            None => bm25,
        }
    };

    // ── Session 1: the agent saves one memory itself; the extractor saves another. ──
    print::banner("session 1: teach the agent about the project");
    let model: Arc<dyn Model> = real
        .clone()
        .unwrap_or_else(|| Arc::new(demo_script::session_one()));
    let mut agent = project
        .agent(model.clone(), selector_for(&model), "session-1")
        .build();
    turn(&mut agent, demo_script::S1_DEADLINE).await?;
    turn(&mut agent, demo_script::S1_PREFERENCE).await?;
    print_index(&project.store).await?;

    // ── Session 2: a new session recalls what session 1 saved. ──
    print::banner("session 2: a new session recalls it");
    let model: Arc<dyn Model> = real
        .clone()
        .unwrap_or_else(|| Arc::new(demo_script::session_two()));
    let mut agent = project
        .agent(model.clone(), selector_for(&model), "session-2")
        .build();
    turn(&mut agent, demo_script::S2_QUESTION).await?;

    // ── Session 3: a long session crosses a small window; the notes become the summary. ──
    print::banner("session 3: a long session is compacted with its session notes");
    let (model, window, small): (Arc<dyn Model>, u64, bool) = match &real {
        Some(m) => (m.clone(), 200_000, false),
        None => (Arc::new(demo_script::session_three()), 30_000, true),
    };
    let builder = project.agent(model.clone(), selector_for(&model), "session-3");
    let mut agent = project
        .with_compaction(builder, "session-3", window, small)?
        .build();
    for file in demo_script::S3_FILES {
        turn(
            &mut agent,
            &format!("read {file} and tell me what it is for"),
        )
        .await?;
    }
    println!(
        "\nafter the session: {} messages in context, ~{} tokens",
        agent.messages().len(),
        agent.context_tokens()
    );
    if args.home.is_some() {
        println!("memory kept in {}", resolved.dir.display());
    }
    Ok(())
}

async fn print_index(store: &Arc<dyn MemoryStore>) -> Result<()> {
    let index = store.load_index().await?;
    println!("\nMEMORY.md now reads:");
    for line in index.content.lines() {
        println!("  │ {line}");
    }
    Ok(())
}
