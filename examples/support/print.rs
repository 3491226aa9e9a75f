//! Readable printing of agent events for the demo.

use memloop::core::events::{AgentEvent, EventAgent, EventEnvelope, EventSink};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// The demo's event sink: the main agent's answer is printed as it streams, everything else
/// one line per event.
#[derive(Default)]
pub struct Printer {
    /// An answer line is open (deltas printed, no newline yet).
    streaming: AtomicBool,
}

impl EventSink for Printer {
    fn emit(&self, event: AgentEvent) {
        self.end_line();
        print_event(event);
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
            other => self.emit(other),
        }
    }
}

impl Printer {
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
    let cut = memloop::core::text::truncate_utf8(&one_line, max);
    if cut.len() < one_line.len() {
        format!("{cut}…")
    } else {
        one_line
    }
}

/// Print one event.
fn print_event(event: AgentEvent) {
    match event {
        AgentEvent::AssistantText { text } => println!("assistant › {}", short(&text, 300)),
        AgentEvent::ToolCallStarted { name, input, .. } => {
            println!("  tool     › {name} {}", short(&input.to_string(), 120))
        }
        AgentEvent::ToolCallFinished {
            output, is_error, ..
        } => {
            println!(
                "  result   › {}{}",
                if is_error { "ERROR " } else { "" },
                short(&output, 100)
            )
        }
        AgentEvent::ToolDenied { name, reason } => println!("  denied   › {name}: {reason}"),
        AgentEvent::MemoriesSurfaced { paths, bytes } => {
            println!(
                "  recall   › surfaced {} ({bytes} bytes) next to the user's message",
                paths.join(", ")
            )
        }
        AgentEvent::RecallSkipped { reason } => println!("  recall   › skipped: {reason}"),
        AgentEvent::MemoriesSaved { paths } => {
            let n = paths.len();
            println!(
                "  memory   › Saved {n} memor{}: {}",
                if n == 1 { "y" } else { "ies" },
                paths.join(", ")
            )
        }
        AgentEvent::ExtractionSkipped { reason } => {
            println!("  memory   › extraction skipped: {reason}")
        }
        AgentEvent::ExtractionFailed { error } => {
            println!("  memory   › extraction failed: {error}")
        }
        AgentEvent::SessionMemoryUpdated { path } => {
            println!("  notes    › session notes updated ({path})")
        }
        AgentEvent::Compacted {
            strategy,
            tokens_before,
            tokens_after,
            messages_kept,
        } => println!(
            "  compact  › {strategy} compaction: {tokens_before} → {tokens_after} tokens, {messages_kept} recent messages kept verbatim"
        ),
        AgentEvent::CompactionFailed {
            error,
            consecutive_failures,
        } => {
            println!("  compact  › failed ({consecutive_failures} in a row): {error}")
        }
        AgentEvent::DreamFinished { paths } => {
            println!("  dream    › consolidated: {}", paths.join(", "))
        }
        AgentEvent::Warning { message } => println!("  warning  › {message}"),
        _ => {}
    }
}
