//! The `agent` tool: the model delegates a task to a sub-agent, in the foreground (the call
//! waits for its answer) or in the background (the call returns its id at once; the answer
//! arrives on the parent's next turn). It is also the [`Hook`] that delivers those answers.

use crate::definition::{AgentDefinition, ChildExtension, ChildKit};
use crate::inbox::{BackgroundResult, Inbox};
use async_trait::async_trait;
use memloop_core::child::{Caller, ChildResult, ChildRun, ChildSpec};
use memloop_core::events::{AgentEvent, SubAgentEnd};
use memloop_core::hooks::PendingAttachment;
use memloop_core::model::Model;
use memloop_core::tool::{
    PermissionGate, Tool, ToolContext, ToolEffect, ToolOutput, ToolRegistry, ToolSpec,
};
use memloop_core::window::ContextWindow;
use memloop_core::{AgentBuilder, Hook, HookContext};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The tool's name.
pub const SUBAGENT_TOOL: &str = "agent";

/// Limits of sub-agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubAgentConfig {
    /// How deep sub-agents may nest: 1 (the default) lets the main agent start sub-agents and
    /// no sub-agent start another; 2 allows one level of grandchildren, and so on. A sub-agent
    /// at the limit does not get the `agent` tool, and a call that would go deeper is refused.
    pub max_depth: u32,
    /// Model calls one sub-agent run may make. Default 20.
    pub max_iterations: u32,
    /// How long one run may take before it is stopped. Default 5 minutes; keep it below the
    /// parent's tool timeout (`AgentConfig::tool_timeout`, 10 minutes), which also bounds a
    /// foreground run.
    pub timeout: Duration,
    /// `max_tokens` of a sub-agent's requests. Default 8,192.
    pub max_tokens: u32,
    /// Background runs at once; a further background call is refused until one finishes.
    /// Default 4.
    pub max_background: usize,
}

impl Default for SubAgentConfig {
    fn default() -> Self {
        Self {
            max_depth: 1,
            max_iterations: 20,
            timeout: Duration::from_secs(300),
            max_tokens: 8_192,
            max_background: 4,
        }
    }
}

/// The `agent` tool over a set of [`AgentDefinition`]s; register it with
/// [`SubAgents::subagents`] on the agent's builder, which also registers it as the hook that
/// hands background results to the parent.
///
/// A sub-agent runs the one agent loop on its own conversation (its task is the first user
/// message; it does not see the parent's), with its own system prompt (the definition's), its
/// tools (the parent's, or the definition's subset), its gate (the parent's, or
/// [`gate`](Self::gate)) and its limits ([`SubAgentConfig`]). Its events reach the host stamped
/// with [`EventAgent::SubAgent`](memloop_core::events::EventAgent::SubAgent) and its id, between a
/// `SubAgentStarted` and a `SubAgentFinished`. Cancelling the parent's turn cancels it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_subagents::{AgentDefinition, SubAgentTool, SubAgents};
/// use memloop_testkit::{ScriptStep, ScriptedModel};
/// use memloop_core::Agent;
/// use serde_json::json;
/// use std::sync::Arc;
///
/// let model = ScriptedModel::new()
///     .on_purpose("subagent:counter", |_| Some(ScriptStep::text("There are 3 files.")))
///     .then(ScriptStep::tool("agent", json!({"agent": "counter", "prompt": "Count the files."})))
///     .then(ScriptStep::text("The sub-agent says: 3 files."));
/// let counter = AgentDefinition::new("counter", "Counts files.", "You count files.");
/// let mut agent = Agent::builder(Arc::new(model.clone()))
///     .subagents(Arc::new(SubAgentTool::new([counter])))
///     .build();
/// let out = agent.run_turn("How many files?").await.unwrap();
/// assert_eq!(out.text, "The sub-agent says: 3 files.");
/// let child = &model.requests_for("subagent:counter")[0];
/// assert_eq!(child.system, vec!["You count files.".to_owned()]);
/// # }
/// ```
pub struct SubAgentTool {
    definitions: BTreeMap<String, Arc<AgentDefinition>>,
    config: SubAgentConfig,
    models: BTreeMap<String, Arc<dyn Model>>,
    extensions: Vec<Arc<dyn ChildExtension>>,
    gate: Option<Arc<dyn PermissionGate>>,
    inbox: Inbox,
    running: Arc<AtomicUsize>,
}

impl std::fmt::Debug for SubAgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubAgentTool")
            .field("agents", &self.definitions.keys().collect::<Vec<_>>())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Input {
    agent: String,
    prompt: String,
    #[serde(default)]
    background: bool,
}

impl SubAgentTool {
    /// A tool over `definitions`. A later definition with the name of an earlier one is
    /// ignored (with a warning): give them in precedence order.
    pub fn new(definitions: impl IntoIterator<Item = AgentDefinition>) -> Self {
        let mut by_name = BTreeMap::new();
        for d in definitions {
            if by_name.contains_key(&d.name) {
                tracing::warn!(agent = %d.name, source = ?d.source, "a sub-agent of this name is already defined; this definition is ignored");
                continue;
            }
            by_name.insert(d.name.clone(), Arc::new(d));
        }
        Self {
            definitions: by_name,
            config: SubAgentConfig::default(),
            models: BTreeMap::new(),
            extensions: Vec::new(),
            gate: None,
            inbox: Inbox::default(),
            running: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Replace the limits (builder style).
    pub fn config(mut self, config: SubAgentConfig) -> Self {
        self.config = config;
        self
    }

    /// Make `model` available to definitions that name it (`model: haiku`) (builder style).
    /// A definition naming a model that was not registered runs on its parent's model, with a
    /// `Warning` event saying so (definitions written for Claude Code name `sonnet`, `opus`,
    /// `haiku`); `inherit`, or no model, runs on the parent's.
    pub fn model(mut self, name: impl Into<String>, model: Arc<dyn Model>) -> Self {
        self.models.insert(name.into(), model);
        self
    }

    /// Adjust every sub-agent with `extension` before it runs (builder style); extensions run
    /// in the order added.
    pub fn extension(mut self, extension: Arc<dyn ChildExtension>) -> Self {
        self.extensions.push(extension);
        self
    }

    /// The permission gate of every sub-agent (builder style); by default each gets its
    /// parent's gate.
    pub fn gate(mut self, gate: Arc<dyn PermissionGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The definitions, by name.
    pub fn definitions(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.definitions.values().map(|d| d.as_ref())
    }

    /// The tools the sub-agent gets from its caller: all of them, or the definition's list
    /// (names the caller lacks are reported and skipped); the `agent` tool only when it may
    /// nest one level deeper.
    fn child_tools(&self, def: &AgentDefinition, caller: &Caller, depth: u32) -> ToolRegistry {
        let mut tools = match &def.tools {
            None => caller.tools().clone(),
            Some(names) => {
                let mut picked = ToolRegistry::new();
                for name in names {
                    match caller.tools().get(name) {
                        Some(tool) => {
                            picked.register(tool.clone());
                        }
                        None => {
                            let message = format!(
                                "agent `{}` lists the tool `{name}`, which its parent does not \
                                 have; it runs without it",
                                def.name
                            );
                            tracing::warn!("{message}");
                            caller.events().emit(AgentEvent::Warning { message });
                        }
                    }
                }
                picked
            }
        };
        if depth >= self.config.max_depth {
            tools.remove(SUBAGENT_TOOL);
        }
        tools
    }

    /// Check the call and put the sub-agent together.
    async fn prepare(
        &self,
        input: &Input,
        ctx: &ToolContext,
        caller: &Caller,
    ) -> Result<ChildRun, String> {
        let Some(def) = self.definitions.get(&input.agent) else {
            let known = self.definitions.keys().cloned().collect::<Vec<_>>();
            return Err(format!(
                "Unknown agent `{}`. Available agents: {}.",
                input.agent,
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        };
        let depth = caller.depth() + 1;
        if depth > self.config.max_depth {
            return Err(format!(
                "Sub-agents may nest at most {} level(s) deep, and this agent is already at depth \
                 {}: do the task yourself.",
                self.config.max_depth,
                caller.depth()
            ));
        }
        if input.prompt.trim().is_empty() {
            return Err("The prompt is empty: give the sub-agent its whole task.".to_owned());
        }
        let (model, window) = match def.model.as_deref().map(str::trim) {
            None | Some("") | Some("inherit") => (caller.model().clone(), caller.window().clone()),
            Some(name) => match self.models.get(name) {
                Some(model) => (model.clone(), ContextWindow::default()),
                None => {
                    let message = format!(
                        "agent `{}` asks for the model `{name}`, which this host does not provide \
                         (registered: {}); it runs on its parent's model",
                        def.name,
                        self.models
                            .keys()
                            .cloned()
                            .chain(["inherit".to_owned()])
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    tracing::warn!("{message}");
                    caller.events().emit(AgentEvent::Warning { message });
                    (caller.model().clone(), caller.window().clone())
                }
            },
        };
        let mut kit = ChildKit {
            definition: def.clone(),
            system: vec![def.system_prompt.clone()],
            tools: self.child_tools(def, caller, depth),
            gate: self.gate.clone().unwrap_or_else(|| caller.gate().clone()),
            withheld: BTreeMap::new(),
        };
        for extension in &self.extensions {
            extension
                .equip(&mut kit)
                .await
                .map_err(|why| format!("agent `{}` could not start: {why}", def.name))?;
        }
        let spec = ChildSpec {
            system: kit.system,
            model,
            window,
            tools: kit.tools,
            gate: kit.gate,
            withheld: kit.withheld,
            max_iterations: self.config.max_iterations,
            max_tokens: self.config.max_tokens,
            timeout: self.config.timeout,
            background: input.background,
            ..ChildSpec::new(caller, def.name.clone(), input.prompt.clone())
        };
        Ok(ChildRun::new(spec, caller, ctx))
    }

    /// Start `run` in the background (tracked, so the parent's `drain` waits for it).
    fn spawn(&self, run: ChildRun, caller: &Caller) -> Result<ToolOutput, String> {
        let running = self.running.fetch_add(1, Ordering::SeqCst);
        if running >= self.config.max_background {
            self.running.fetch_sub(1, Ordering::SeqCst);
            return Err(format!(
                "{running} background agents are already running (the limit is {}); wait for one \
                 to finish, or run this one in the foreground",
                self.config.max_background
            ));
        }
        let (id, name) = (run.id().to_owned(), run.name().to_owned());
        let inbox = self.inbox.clone();
        let counter = self.running.clone();
        caller
            .background()
            .spawn(format!("subagent-{name}-{id}"), async move {
                let (id, name) = (run.id().to_owned(), run.name().to_owned());
                let result = run.run().await;
                counter.fetch_sub(1, Ordering::SeqCst);
                inbox.push(BackgroundResult {
                    id,
                    name,
                    end: result.end,
                    text: result.text,
                });
            });
        Ok(ToolOutput::ok(format!(
            "Started agent `{name}` in the background (id {id}). Its result will arrive as a \
             system reminder in a later turn; carry on meanwhile."
        )))
    }
}

/// A foreground run's result as the tool's output.
fn output(name: &str, result: ChildResult) -> ToolOutput {
    match result.end {
        SubAgentEnd::Completed if result.text.trim().is_empty() => {
            ToolOutput::ok(format!("Agent `{name}` finished without writing any text."))
        }
        SubAgentEnd::Completed => ToolOutput::ok(result.text),
        end => {
            let partial = if result.text.trim().is_empty() {
                String::new()
            } else {
                format!(" Its last text:\n{}", result.text)
            };
            ToolOutput::error(format!(
                "Agent `{name}` did not finish ({end}, after {} model calls).{partial}",
                result.turns
            ))
        }
    }
}

#[async_trait]
impl Tool for SubAgentTool {
    fn spec(&self) -> ToolSpec {
        let mut description = String::from(
            "Delegate a task to a sub-agent. It works on its own, with its own instructions and \
             tools, and does not see this conversation: give it a complete, self-contained \
             prompt. Its final answer comes back as this tool's result. With `background: \
             true` the call returns at once and the answer arrives in a later turn.\n\n\
             Available agents:",
        );
        if self.definitions.is_empty() {
            description.push_str(" none.");
        }
        for d in self.definitions.values() {
            description.push_str(&format!("\n- `{}`: {}", d.name, d.description.trim()));
        }
        ToolSpec {
            name: SUBAGENT_TOOL.into(),
            description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "agent": {
                        "type": "string",
                        "enum": self.definitions.keys().collect::<Vec<_>>(),
                        "description": "which agent to run"
                    },
                    "prompt": {"type": "string", "description": "the whole task, self-contained"},
                    "background": {"type": "boolean", "description": "return at once; the result arrives in a later turn (default false)"}
                },
                "required": ["agent", "prompt"]
            }),
            effect: ToolEffect::Other,
        }
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> ToolOutput {
        let input: Input = match serde_json::from_value(input) {
            Ok(i) => i,
            Err(e) => return ToolOutput::error(format!("{SUBAGENT_TOOL}: invalid input: {e}")),
        };
        let Some(caller) = Caller::current() else {
            return ToolOutput::error(format!(
                "{SUBAGENT_TOOL}: sub-agents can only be started from an agent loop"
            ));
        };
        if input.background && caller.depth() > 0 {
            return ToolOutput::error(
                "Only the main agent can start background agents (a sub-agent has no later turn \
                 to receive the result); run it in the foreground.",
            );
        }
        let run = match self.prepare(&input, ctx, &caller).await {
            Ok(run) => run,
            Err(why) => {
                tracing::info!(agent = %input.agent, reason = %why, "sub-agent not started");
                return ToolOutput::error(why);
            }
        };
        if input.background {
            return self.spawn(run, &caller).unwrap_or_else(ToolOutput::error);
        }
        let name = run.name().to_owned();
        output(&name, run.run().await)
    }
}

/// Delivers finished background runs: at the start of the parent's next turn, they are attached
/// next to the user's message as one system reminder (kind `subagent_results`).
#[async_trait]
impl Hook for SubAgentTool {
    async fn on_turn_start(
        &self,
        _ctx: &HookContext,
        _user_text: &str,
    ) -> Option<PendingAttachment> {
        self.inbox.take_attachment().map(PendingAttachment::ready)
    }
}

/// Sub-agents on an agent's builder, in one call: `Agent::builder(model).subagents(tool)` (see
/// [`SubAgentTool`]'s example). Implemented for core's [`AgentBuilder`] through its public
/// `tool` and `hook`.
pub trait SubAgents {
    /// Let the model delegate to sub-agents: registers `tool` as the `agent` tool and as the
    /// hook that hands finished background runs to the next turn.
    fn subagents(self, tool: Arc<SubAgentTool>) -> Self;
}

impl SubAgents for AgentBuilder {
    fn subagents(self, tool: Arc<SubAgentTool>) -> Self {
        self.tool(tool.clone()).hook(tool)
    }
}
