//! The memloop demo: an offline agent session driven by a **scripted** model (no API key, no
//! network). The model's answers are canned; everything else (the loop, tools, events) is real.
//!
//! Run it with `cargo run --example agent_loop`.
#![allow(clippy::print_stdout)]

use anyhow::Result;
use async_trait::async_trait;
use memloop::core::testing::{ScriptStep, ScriptedModel};
use memloop::core::{
    Agent, AgentEvent, StaticSection, Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A real (if tiny) tool: counts the lines of a file in the working directory.
struct LineCount;

#[async_trait]
impl Tool for LineCount {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "line_count".into(),
            description: "Count the lines of a file".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            effect: ToolEffect::ReadOnly,
        }
    }

    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        let Some(path) = input.get("path").and_then(|p| p.as_str()) else {
            return ToolOutput::error("missing `path`");
        };
        match tokio::fs::read_to_string(ctx.cwd.join(path)).await {
            Ok(text) => ToolOutput::ok(format!("{path} has {} lines", text.lines().count())),
            Err(e) => ToolOutput::error(format!("cannot read {path}: {e}")),
        }
    }
}

fn print_event(event: AgentEvent) {
    match event {
        AgentEvent::TurnStarted { turn } => println!("\n── turn {turn} ──"),
        AgentEvent::AssistantText { text } => println!("assistant › {text}"),
        AgentEvent::ToolCallStarted { name, input, .. } => println!("  tool    › {name} {input}"),
        AgentEvent::ToolCallFinished {
            output, is_error, ..
        } => {
            println!(
                "  result  › {}{output}",
                if is_error { "ERROR " } else { "" }
            )
        }
        AgentEvent::ToolDenied { name, reason } => println!("  denied  › {name}: {reason}"),
        AgentEvent::TurnFinished { iterations, .. } => println!("  ({iterations} model calls)"),
        _ => {}
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    println!(
        "memloop demo — the model is SCRIPTED (offline, deterministic); tools and the loop are real."
    );
    let model = ScriptedModel::new()
        .then(ScriptStep::tool(
            "line_count",
            json!({"path": "Cargo.toml"}),
        ))
        .then(ScriptStep::text(
            "Cargo.toml is short; the workspace has three crates plus the facade.",
        ));

    let mut agent = Agent::builder(Arc::new(model))
        .section(Arc::new(StaticSection::new(
            "persona",
            "You are a concise coding agent.",
        )))
        .tool(Arc::new(LineCount))
        .events(Arc::new(print_event))
        .build();

    let user = "How big is our Cargo.toml?";
    println!("\nuser › {user}");
    agent.run_turn(user).await?;
    let report = agent.drain(Duration::from_secs(60)).await;
    println!("\nbackground work: {report}");
    Ok(())
}
