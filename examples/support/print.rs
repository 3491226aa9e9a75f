//! Readable printing of agent events for the demo.

use memloop::core::AgentError;
use memloop::core::events::{AgentEvent, EventAgent, EventEnvelope, EventSink};
use memloop::core::model::ModelError;
use memloop::core::window::ContextWindow;
use memloop::memory::MemoryEvent;
use memloop::memory::recall::RecallEvent;
use memloop::memory::session_notes::NotesEvent;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// The demo's event sink: the main agent's answer is printed as it streams, everything else
/// one line per event, tagged with the agent and the turn it belongs to (`[session-2 t1]`,
/// `[session-1 t2 extractor]`): background work of one session may finish while the next one
/// runs.
pub struct Printer {
    /// The session this printer's agent runs.
    session: String,
    /// An answer line is open (deltas printed, no newline yet).
    streaming: AtomicBool,
}

impl EventSink for Printer {
    fn emit(&self, event: AgentEvent) {
        self.end_line();
        print_event(event, &format!("[{}]", self.session));
    }

    fn emit_envelope(&self, e: EventEnvelope) {
        let main = e.agent == EventAgent::Main;
        match e.event {
            AgentEvent::TextDelta { text, .. } if main => {
                if !self.streaming.swap(true, Ordering::SeqCst) {
                    print!("assistant › ");
                }
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
            // Already shown as it streamed.
            AgentEvent::AssistantText { .. } if main => self.end_line(),
            AgentEvent::TextDelta { .. }
            | AgentEvent::ThinkingDelta { .. }
            | AgentEvent::ToolInputDelta { .. }
            | AgentEvent::ToolUseStarted { .. } => {}
            other => {
                self.end_line();
                print_event(other, &self.tag(&e.agent, e.turn));
            }
        }
    }
}

impl Printer {
    /// A printer for the agent of `session`.
    pub fn new(session: &str) -> Self {
        Self {
            session: session.to_owned(),
            streaming: AtomicBool::new(false),
        }
    }

    /// `[session-2 t1]`, `[session-1 t2 extractor]`: whose event this is.
    fn tag(&self, agent: &EventAgent, turn: u64) -> String {
        let who = match agent {
            EventAgent::Main => String::new(),
            EventAgent::Fork { purpose, .. } => format!(" {purpose}"),
            EventAgent::SubAgent { name, .. } => format!(" agent {name}"),
        };
        format!("[{} t{turn}{who}]", self.session)
    }

    fn end_line(&self) {
        if self.streaming.swap(false, Ordering::SeqCst) {
            println!();
        }
    }
}

/// Print a section banner.
pub fn banner(title: &str) {
    println!("\n━━━ {title} ━━━");
}

fn short(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ⏎ ");
    let cut = memloop::text::truncate_utf8(&one_line, max);
    if cut.len() < one_line.len() {
        format!("{cut}…")
    } else {
        one_line
    }
}

/// Print one event.
fn print_event(event: AgentEvent, tag: &str) {
    if print_extension(&event, tag) {
        return;
    }
    match event {
        AgentEvent::AssistantText { text } => println!("assistant › {tag} {}", short(&text, 300)),
        AgentEvent::ToolCallStarted { name, input, .. } => {
            println!(
                "  tool     › {tag} {name} {}",
                short(&input.to_string(), 120)
            )
        }
        AgentEvent::ToolCallFinished {
            output, is_error, ..
        } => {
            println!(
                "  result   › {tag} {}{}",
                if is_error { "ERROR " } else { "" },
                short(&output, 100)
            )
        }
        AgentEvent::ToolDenied { name, reason } => println!("  denied   › {tag} {name}: {reason}"),
        AgentEvent::Compacted {
            strategy,
            tokens_before,
            tokens_after,
            messages_kept,
        } => println!(
            "  compact  › {tag} {strategy} compaction: {tokens_before} → {tokens_after} tokens, {messages_kept} recent messages kept verbatim"
        ),
        AgentEvent::CompactionFailed {
            error,
            consecutive_failures,
        } => {
            println!("  compact  › {tag} failed ({consecutive_failures} in a row): {error}")
        }
        AgentEvent::Warning { message } => println!("  warning  › {tag} {message}"),
        AgentEvent::ContextWindowLearned { tokens } => println!(
            "  window   › {tag} the provider's context is {} tokens; thresholds and output caps now use it",
            thousands(tokens)
        ),
        // Per turn: what was read from the provider's prompt cache and what was written to it.
        AgentEvent::TurnFinished {
            iterations, usage, ..
        } if usage.input_tokens + usage.output_tokens > 0 => println!(
            "  usage    › {tag} {iterations} call(s): {} uncached input + {} cache read + {} cache written, {} output",
            thousands(usage.input_tokens),
            thousands(usage.cache_read_input_tokens),
            thousands(usage.cache_creation_input_tokens),
            thousands(usage.output_tokens)
        ),
        AgentEvent::ForkSkipped { purpose, reason } => {
            println!("  fork     › {tag} {purpose} skipped: {reason}")
        }
        _ => {}
    }
}

/// `8192` → `8,192`.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Print a failed turn's typed error, what it means and what to do.
pub fn turn_error(err: &AgentError, window: &ContextWindow) {
    let (meaning, advice) = explain(err, window);
    println!("  error    › {err}");
    println!("  meaning  › {meaning}");
    println!("  to do    › {advice}");
}

fn explain(err: &AgentError, window: &ContextWindow) -> (String, String) {
    let w = thousands(window.tokens());
    match err {
        AgentError::Model(ModelError::ContextTooLong { limit, .. }) => {
            let ctx = limit.map_or_else(|| w.clone(), thousands);
            (
                format!(
                    "the request does not fit the model's context window, even after compaction; \
                     the server's context is {ctx} tokens"
                ),
                "pass --context-window with the server's context size, start the server with a \
                 bigger context, or use a bigger model"
                    .into(),
            )
        }
        AgentError::ContextBlocked(_) => (
            format!("the conversation is too large to send in a {w}-token window"),
            "start a new session, or pass --context-window / use a model with a bigger context"
                .into(),
        ),
        AgentError::Model(ModelError::Auth(_)) => (
            "the provider rejected the credentials".into(),
            "check ANTHROPIC_API_KEY / OPENAI_API_KEY".into(),
        ),
        AgentError::Model(ModelError::RateLimited { .. } | ModelError::Overloaded(_)) => (
            "the provider is busy or rate limited and retries ran out".into(),
            "wait a little and run again".into(),
        ),
        AgentError::Model(ModelError::Transport(_) | ModelError::Timeout) => (
            "the model server could not be reached or did not answer in time".into(),
            "check that the server runs and OPENAI_BASE_URL / ANTHROPIC_BASE_URL point at it"
                .into(),
        ),
        AgentError::Model(ModelError::Http { status, .. }) => (
            format!("the provider answered HTTP {status}"),
            "check the model name (--model) and the server's log".into(),
        ),
        AgentError::Model(_) => (
            "the model call failed".into(),
            "check the server's log; run again".into(),
        ),
        AgentError::Cancelled => ("the turn was cancelled".into(), "nothing to do".into()),
        _ => (
            "the turn failed".into(),
            "see the error above; start a new session".into(),
        ),
    }
}

/// Print an event of a memory crate (carried as `AgentEvent::Extension`); `false` when it is
/// not one this demo prints.
fn print_extension(event: &AgentEvent, tag: &str) -> bool {
    if let Some(e) = event.extension::<RecallEvent>() {
        match e {
            RecallEvent::MemoriesSurfaced { paths, bytes } => {
                println!(
                    "  recall   › {tag} surfaced {} ({bytes} bytes) next to the user's message",
                    paths.join(", ")
                )
            }
            RecallEvent::RecallSkipped { reason } => {
                println!("  recall   › {tag} skipped: {reason}")
            }
            _ => return false,
        }
        return true;
    }
    if let Some(e) = event.extension::<MemoryEvent>() {
        match e {
            MemoryEvent::MemoriesSaved { paths } => {
                let n = paths.len();
                println!(
                    "  memory   › {tag} Saved {n} memor{}: {}",
                    if n == 1 { "y" } else { "ies" },
                    paths.join(", ")
                )
            }
            MemoryEvent::ExtractionSkipped { reason } => {
                println!("  memory   › {tag} extraction skipped: {reason}")
            }
            MemoryEvent::ExtractionFailed { error } => {
                println!("  memory   › {tag} extraction failed: {error}")
            }
            MemoryEvent::DreamFinished { paths } => {
                println!("  dream    › {tag} consolidated: {}", paths.join(", "))
            }
            _ => return false,
        }
        return true;
    }
    if let Some(e) = event.extension::<NotesEvent>() {
        match e {
            NotesEvent::NotesUpdated { path } => {
                println!("  notes    › {tag} session notes updated ({path})")
            }
            _ => return false,
        }
        return true;
    }
    false
}
