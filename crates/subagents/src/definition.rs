//! What a sub-agent is made of: its [`AgentDefinition`], and the [`ChildKit`] that
//! [`ChildExtension`]s adjust before it runs.

use async_trait::async_trait;
use memloop_core::tool::{PermissionGate, Tool, ToolRegistry};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// A kind of sub-agent the model may delegate to: a name, a description (the model picks by
/// it), the sub-agent's system prompt, and which tools and model it gets.
///
/// Hosts build definitions in code or load them from markdown files ([`AgentDirs`](crate::AgentDirs)
/// reads Claude Code's format: `.claude/agents/*.md`).
///
/// ```
/// use memloop_subagents::AgentDefinition;
/// let reviewer = AgentDefinition::new(
///     "reviewer",
///     "Reviews a diff for bugs; use after a change.",
///     "You are a careful code reviewer. Report bugs only.",
/// )
/// .with_tools(["read_file", "grep"]);
/// assert_eq!(reviewer.tools.as_deref(), Some(&["read_file".to_owned(), "grep".to_owned()][..]));
/// assert!(reviewer.model.is_none()); // the parent's model
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    /// Unique name; the model names it in its `agent` tool call. Any script.
    pub name: String,
    /// When to use it, for the model (listed in the tool's description).
    pub description: String,
    /// The sub-agent's system prompt.
    pub system_prompt: String,
    /// The parent's tools it gets, by name; `None` inherits all of them.
    pub tools: Option<Vec<String>>,
    /// A model the host registered under this name
    /// ([`SubAgentTool::model`](crate::SubAgentTool::model)); `None`, or a name the host did
    /// not register, uses the parent's.
    pub model: Option<String>,
    /// Further settings for [`ChildExtension`]s, by key (the memory crate reads `memory`:
    /// `user`, `project` or `local`).
    pub metadata: BTreeMap<String, String>,
    /// The file it was loaded from, if any.
    pub source: Option<PathBuf>,
}

impl AgentDefinition {
    /// A definition that inherits the parent's tools and model.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        system_prompt: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            system_prompt: system_prompt.into(),
            tools: None,
            model: None,
            metadata: BTreeMap::new(),
            source: None,
        }
    }

    /// Give it only these of the parent's tools (builder style).
    pub fn with_tools<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Run it on the model registered under `name` (builder style).
    pub fn with_model(mut self, name: impl Into<String>) -> Self {
        self.model = Some(name.into());
        self
    }

    /// Set a metadata entry for extensions (builder style), e.g. `("memory", "project")`.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }
}

/// What a sub-agent starts with, before it runs: [`ChildExtension`]s adjust it.
#[derive(Debug)]
pub struct ChildKit {
    /// The definition it runs.
    pub definition: Arc<AgentDefinition>,
    /// Its system prompt sections; the first is the definition's prompt.
    pub system: Vec<String>,
    /// Its tools.
    pub tools: ToolRegistry,
    /// Its permission gate (the parent's, unless the host set one for sub-agents).
    pub gate: Arc<dyn PermissionGate>,
    pub(crate) withheld: BTreeMap<String, String>,
}

impl ChildKit {
    /// Take `tool` away from the sub-agent (when it has it): a call to it is then refused with
    /// `reason` (a clause: "`memory_write` is not available: {reason}.") instead of as an
    /// unknown tool.
    pub fn withhold(&mut self, tool: &str, reason: impl Into<String>) {
        self.tools.remove(tool);
        self.withheld.insert(tool.to_owned(), reason.into());
    }

    /// Give the sub-agent `tool`, replacing a tool of the same name (e.g. a memory tool bound
    /// to the sub-agent's own memory dir); it is no longer withheld.
    pub fn give(&mut self, tool: Arc<dyn Tool>) {
        self.withheld.remove(&tool.spec().name);
        self.tools.register(tool);
    }

    /// The reason a withheld tool is refused with, if it was withheld.
    pub fn withheld(&self, tool: &str) -> Option<&str> {
        self.withheld.get(tool).map(String::as_str)
    }
}

/// Adjusts every sub-agent before it runs: adds or withholds tools, adds system-prompt
/// sections, wraps the gate. The memory crate's agent memory is one: it gives a definition
/// with `memory: project` the memory tools of its own memory dir, and every other sub-agent
/// none.
#[async_trait]
pub trait ChildExtension: Send + Sync {
    /// Adjust `kit`. `Err` explains why the sub-agent cannot start; the `agent` tool call then
    /// fails with it.
    async fn equip(&self, kit: &mut ChildKit) -> Result<(), String>;
}
