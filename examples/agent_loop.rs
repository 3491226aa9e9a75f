//! The memloop demo: three sessions of one project, showing memory across sessions and compaction.
//!
//! By default the model is a `ScriptedModel`: its answers are canned (offline, no API key,
//! deterministic) and the demo says so. The assistant's answers are printed as they stream. Everything else is real: the agent loop, tools, the memory
//! dir on disk, the background extractor, recall, session notes and compaction.
//!
//! ```text
//! cargo run --example agent_loop                        # offline, scripted
//! cargo run --example agent_loop -- --home /tmp/ml      # keep the memory dir afterwards
//! cargo run --example agent_loop --features providers -- --provider anthropic --model claude-sonnet-4-5
//! cargo run --example agent_loop --features providers -- --provider openai --model local --context-window 8192
//! ```
//!
//! A provider error never ends the demo with a backtrace: the session stops, the error is printed
//! with what it means and what to do, and the next session starts.
#![allow(clippy::print_stdout)]

#[path = "support/demo_script.rs"]
mod demo_script;
#[path = "support/print.rs"]
mod print;

use anyhow::{Context, Result, bail};
use memloop::MemorySetup;
use memloop::MemoryStore;
use memloop::compact::{CompactConfig, SessionMemoryCompactConfig};
use memloop::core::window::{ContextWindow, DEFAULT_CONTEXT_WINDOW};
use memloop::core::{Agent, AgentConfig, model::Model, prompt::StaticSection};
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::recall::{Bm25Selector, FallbackSelector, LlmSelector};
use memloop::memory::session_notes::UpdateThresholds;
use memloop::tools::ReadFile;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

struct Args {
    provider: Option<String>,
    model: Option<String>,
    home: Option<PathBuf>,
    context_window: Option<u64>,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        provider: None,
        model: None,
        home: None,
        context_window: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--provider" => args.provider = Some(it.next().context("--provider needs a value")?),
            "--model" => args.model = Some(it.next().context("--model needs a value")?),
            "--home" => args.home = Some(it.next().context("--home needs a value")?.into()),
            "--context-window" => {
                let v = it.next().context("--context-window needs a value")?;
                let n: u64 = v
                    .replace([',', '_'], "")
                    .parse()
                    .with_context(|| format!("--context-window: `{v}` is not a token count"))?;
                args.context_window = Some(n);
            }
            "-h" | "--help" => {
                println!(
                    "usage: agent_loop [--provider anthropic|openai] [--model NAME] [--home DIR] \
                     [--context-window TOKENS]"
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
    Ok(memloop::providers::from_env(provider, model)?)
}

#[cfg(not(feature = "providers"))]
fn real_model(_provider: &str, _model: Option<&str>) -> Result<Arc<dyn Model>> {
    bail!("this build has no HTTP providers: run with `--features providers`")
}

/// A new agent for one session, with memory wired in by [`MemorySetup`].
fn new_agent(
    memory: &MemorySetup,
    model: Arc<dyn Model>,
    session: &str,
    cwd: &std::path::Path,
    window: &ContextWindow,
) -> Result<Agent> {
    let builder = Agent::builder(model)
        // One handle for every session: a limit learned in one is known to the next.
        .context_window(window.clone())
        .config(AgentConfig {
            session_id: session.into(),
            cwd: cwd.to_path_buf(),
            ..AgentConfig::default()
        })
        .events(Arc::new(print::Printer::new(session)))
        .section(Arc::new(StaticSection::new(
            "persona",
            "You are a concise coding agent working in the memloop repository.",
        )))
        .tool(Arc::new(ReadFile::default()));
    Ok(memory.attach(builder)?.build())
}

/// Session notes + compaction. With the scripted model the window is tiny, so the session crosses
/// it in a few turns.
fn with_compaction(memory: MemorySetup, small: bool, window: u64) -> MemorySetup {
    let Some(mut notes) = memory.default_notes_config() else {
        return memory; // memory is off: no notes either
    };
    let mut compact = CompactConfig::for_model(if small { 30_000 } else { window }, 2_000);
    if small {
        notes.thresholds = UpdateThresholds {
            init_tokens: 1_500,
            min_tokens_between_updates: 800,
            tool_calls_between_updates: 2,
        };
        compact.warning_buffer = 3_000;
        compact.session_memory = SessionMemoryCompactConfig {
            min_tokens: 800,
            min_text_messages: 2,
            max_tokens: 2_500,
            ..Default::default()
        };
    }
    memory.compaction(compact, notes)
}

/// One user turn. Returns whether the session may go on: on an error the turn's typed error is
/// printed with what it means and what to do, background work is drained, and the session ends.
async fn turn(agent: &mut Agent, text: &str) -> bool {
    println!("\nuser › {text}");
    let result = agent.run_turn(text).await;
    // Wait for background work (extraction, notes) so the demo's output stays in order.
    let report = agent.drain(Duration::from_secs(60)).await;
    if !report.completed {
        println!("  (background work still running: {report})");
    }
    match result {
        Ok(_) => true,
        Err(e) => {
            print::turn_error(&e, agent.context_window());
            println!("  session  › ended after the error above; the demo goes on");
            false
        }
    }
}

/// Run `texts` as turns of one session until one fails.
async fn session(agent: &mut Agent, texts: &[&str]) {
    for text in texts {
        if !turn(agent, text).await {
            return;
        }
    }
}

fn main() -> Result<()> {
    // With `--features otel` and OTEL_EXPORTER_OTLP_ENDPOINT set, the run's spans (agents,
    // turns, model requests, tool calls) go to that collector: see docs/observability.md.
    #[cfg(feature = "otel")]
    let export = traces()?;
    let outcome = tokio::runtime::Runtime::new()?.block_on(demo());
    #[cfg(feature = "otel")]
    if let Some(export) = export {
        export.shutdown()?;
    }
    outcome
}

/// Export the spans when the standard variables name a collector.
#[cfg(feature = "otel")]
fn traces() -> Result<Option<memloop::otel::OtlpExport>> {
    use memloop::otel::{OtlpConfig, OtlpExport};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let Some(config) = OtlpConfig::from_env(&EnvVars::from_process())? else {
        return Ok(None);
    };
    let export = OtlpExport::start(&config)?;
    tracing_subscriber::registry().with(export.layer()).init();
    println!("traces go to {}", config.traces_endpoint);
    Ok(Some(export))
}

async fn demo() -> Result<()> {
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
    let mut memory = MemorySetup::with_resolver(MemoryDirResolver::new(&cwd), env)?;
    let Some(resolved) = memory.memory_dir().cloned() else {
        bail!("memory is switched off (MEMLOOP_DISABLE_AUTO_MEMORY); unset it to run the demo");
    };
    let store = memory.store().cloned().context("memory is switched off")?;
    println!(
        "\nmemory dir: {}\n  chosen by: {}",
        resolved.dir.display(),
        resolved.reason
    );
    if let Some(model) = &real {
        // With a real model: the LLM picks memories, BM25 takes over on error or timeout.
        let bm25 = Arc::new(Bm25Selector::new(store.clone()));
        let llm = Arc::new(LlmSelector::new(model.clone()));
        memory = memory.selector(Arc::new(FallbackSelector::new(
            llm,
            bm25,
            Duration::from_secs(10),
        )));
    }
    let window = ContextWindow::new(args.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW));
    if real.is_some() {
        // A real model may have a small window: compaction (and its window handling) from the
        // first session on.
        memory = with_compaction(memory, false, window.tokens());
    }
    let scripted = |script: fn() -> memloop::testkit::ScriptedModel| -> Arc<dyn Model> {
        // Scripted answers stream in small pieces, like a real provider's.
        real.clone()
            .unwrap_or_else(|| Arc::new(script().chunked(6)))
    };

    // ── Session 1: the agent saves one memory itself; the extractor saves another. ──
    print::banner("session 1: teach the agent about the project");
    let mut agent = new_agent(
        &memory,
        scripted(demo_script::session_one),
        "session-1",
        &cwd,
        &window,
    )?;
    session(
        &mut agent,
        &[demo_script::S1_DEADLINE, demo_script::S1_PREFERENCE],
    )
    .await;
    print_index(&store).await?;

    // ── Session 2: a new session recalls what session 1 saved. ──
    print::banner("session 2: a new session recalls it");
    let mut agent = new_agent(
        &memory,
        scripted(demo_script::session_two),
        "session-2",
        &cwd,
        &window,
    )?;
    session(&mut agent, &[demo_script::S2_QUESTION]).await;

    // ── Session 3: a long session crosses a small window; the notes become the summary. ──
    print::banner("session 3: a long session is compacted with its session notes");
    let memory = with_compaction(memory, real.is_none(), window.tokens());
    let mut agent = new_agent(
        &memory,
        scripted(demo_script::session_three),
        "session-3",
        &cwd,
        &window,
    )?;
    let texts: Vec<String> = demo_script::S3_FILES
        .iter()
        .map(|file| format!("read {file} and tell me what it is for"))
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    session(&mut agent, &texts).await;
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
