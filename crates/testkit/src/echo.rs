//! A tool that answers with its input.

use crate::{ScriptStep, ScriptedModel};
use async_trait::async_trait;
use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};

/// A read-only tool named `echo` that answers with its input, as JSON text: a real tool call
/// through the loop (its span, its events, its result in the conversation) with nothing else
/// in the way.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_core::Agent;
/// use memloop_core::message::ContentBlock;
/// use memloop_testkit::{Echo, ScriptStep, ScriptedModel};
/// use std::sync::Arc;
///
/// let model = Arc::new(
///     ScriptedModel::new()
///         .then(ScriptStep::tool("echo", serde_json::json!({"q": 1})))
///         .then(ScriptStep::text("done")),
/// );
/// let mut agent = Agent::builder(model.clone()).tool(Arc::new(Echo)).build();
/// agent.run_turn("echo something").await.unwrap();
/// let results: Vec<String> = model.requests()[1]
///     .messages
///     .iter()
///     .flat_map(|m| &m.content)
///     .filter_map(|b| match b {
///         ContentBlock::ToolResult { content, .. } => Some(content.text()),
///         _ => None,
///     })
///     .collect();
/// assert_eq!(results, [r#"{"q":1}"#]);
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

impl Echo {
    /// A scripted model whose main agent, in every turn, calls `echo` once with `{"q": 1}` and
    /// answers `answer` once it has the result: one tool round trip per turn, however many
    /// turns run.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use memloop_core::Agent;
    /// use memloop_testkit::Echo;
    /// use std::sync::Arc;
    ///
    /// let model = Echo::once_then("done");
    /// let mut agent = Agent::builder(Arc::new(model.clone())).tool(Arc::new(Echo)).build();
    /// for _ in 0..2 {
    ///     assert_eq!(agent.run_turn("go").await.unwrap().text, "done");
    /// }
    /// assert_eq!(model.requests_for("main").len(), 4);
    /// # }
    /// ```
    pub fn once_then(answer: &str) -> ScriptedModel {
        let answer = answer.to_owned();
        ScriptedModel::new().on_purpose("main", move |req| {
            let answered = req
                .messages
                .last()
                .is_some_and(|m| m.tool_result_ids().next().is_some());
            Some(match answered {
                false => ScriptStep::tool("echo", serde_json::json!({"q": 1})),
                true => ScriptStep::text(answer.clone()),
            })
        })
    }
}

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "echo".into(),
            description: "Echo the input.".into(),
            input_schema: serde_json::json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }

    async fn call(&self, input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        ToolOutput::ok(input.to_string())
    }
}
