//! Tools the model can call, their registry, and the permission gate consulted before each call.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a tool does to the world; permission gates decide on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEffect {
    /// Reads only (read, grep, glob, read-only shell).
    ReadOnly,
    /// Creates or modifies files; [`Tool::write_targets`] names them.
    WritesFiles,
    /// Runs arbitrary commands.
    Shell,
    /// Anything else (network, ...).
    Other,
}

/// How a tool presents itself to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Unique name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of the input object.
    pub input_schema: serde_json::Value,
    /// Its effect class.
    pub effect: ToolEffect,
}

/// Whether this is the main agent or a forked helper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentKind {
    /// The user's agent.
    Main,
    /// A forked agent (extractor, session-memory updater, ...), with its purpose.
    Forked(String),
    /// A sub-agent the model delegated a task to ([`crate::child`]), with its agent name.
    SubAgent(String),
}

/// What a tool sees when it runs.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Session id.
    pub session_id: String,
    /// Working directory of the agent.
    pub cwd: PathBuf,
    /// Main or forked.
    pub agent: AgentKind,
    /// Fires when the turn is cancelled.
    pub cancel: CancellationToken,
}

/// The result of one tool call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// Text shown to the model.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// Files this call created or modified (absolute paths).
    pub files_written: Vec<PathBuf>,
    /// Images or documents returned with the text (`ContentBlock::Image` / `Document`); they go
    /// into the tool result after the text.
    pub media: Vec<crate::message::ContentBlock>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Self::default()
        }
    }

    /// A failed result; the text explains the failure to the model.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            files_written: Vec::new(),
            media: Vec::new(),
        }
    }

    /// Attach an image or document block (builder style).
    ///
    /// ```
    /// use memloop_core::{message::{ContentBlock, MediaSource}, tool::ToolOutput};
    /// let out = ToolOutput::ok("screenshot attached").with_media(ContentBlock::Image {
    ///     source: MediaSource::Base64 { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() },
    /// });
    /// assert_eq!(out.media.len(), 1);
    /// ```
    pub fn with_media(mut self, block: crate::message::ContentBlock) -> Self {
        self.media.push(block);
        self
    }

    /// Record a written file (builder style).
    pub fn with_file_written(mut self, path: impl Into<PathBuf>) -> Self {
        self.files_written.push(path.into());
        self
    }
}

/// A tool. Object-safe: registries hold `Arc<dyn Tool>`.
///
/// ```
/// use memloop_core::tool::{Tool, ToolContext, ToolEffect, ToolOutput, ToolSpec};
///
/// struct Clock;
///
/// #[async_trait::async_trait]
/// impl Tool for Clock {
///     fn spec(&self) -> ToolSpec {
///         ToolSpec {
///             name: "clock".into(),
///             description: "Current time".into(),
///             input_schema: serde_json::json!({"type": "object", "properties": {}}),
///             effect: ToolEffect::ReadOnly,
///         }
///     }
///     async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
///         ToolOutput::ok("12:00")
///     }
/// }
/// ```
#[async_trait]
pub trait Tool: Send + Sync {
    /// The tool's spec (name, schema, effect).
    fn spec(&self) -> ToolSpec;

    /// Files this call would write, resolved to absolute paths, so a gate can check them before
    /// the call. `Err` explains why the targets cannot be determined (the gate then denies).
    fn write_targets(
        &self,
        _input: &serde_json::Value,
        _ctx: &ToolContext,
    ) -> Result<Vec<PathBuf>, String> {
        Ok(Vec::new())
    }

    /// Run the call. Failures are reported in the output (`is_error`), never by panicking.
    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput;
}

/// A set of tools by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add (or replace) a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        self.tools.insert(tool.spec().name, tool);
        self
    }

    /// Builder-style [`register`](Self::register).
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Self {
        self.register(tool);
        self
    }

    /// Remove a tool; returns it when it was there.
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.remove(name)
    }

    /// Look a tool up.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Specs of all tools, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }

    /// Tool names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// A tool call awaiting permission.
#[derive(Debug, Clone)]
pub struct ToolCallRequest {
    /// Tool name.
    pub name: String,
    /// Its input.
    pub input: serde_json::Value,
    /// The tool's effect class.
    pub effect: ToolEffect,
    /// What it would write ([`Tool::write_targets`]), or why that is unknown.
    pub write_targets: Result<Vec<PathBuf>, String>,
}

/// A gate's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionDecision {
    /// Run the call.
    Allow,
    /// Do not run it; the reason is returned to the model as an error tool result.
    Deny(String),
}

/// Decides, before every tool call, whether it may run.
///
/// ```
/// use memloop_core::tool::{PermissionDecision, PermissionGate, ToolCallRequest, ToolContext, ToolEffect};
///
/// struct ReadOnly;
///
/// #[async_trait::async_trait]
/// impl PermissionGate for ReadOnly {
///     async fn check(&self, call: &ToolCallRequest, _ctx: &ToolContext) -> PermissionDecision {
///         if call.effect == ToolEffect::ReadOnly {
///             PermissionDecision::Allow
///         } else {
///             PermissionDecision::Deny(format!("{} is not read-only", call.name))
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait PermissionGate: Send + Sync {
    /// Decide on one call.
    async fn check(&self, call: &ToolCallRequest, ctx: &ToolContext) -> PermissionDecision;
}

/// A gate that allows everything (the default for the main agent; hosts usually supply their own).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

#[async_trait]
impl PermissionGate for AllowAll {
    async fn check(&self, _call: &ToolCallRequest, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }
}

/// A gate that denies every call, with a reason the model can read. The default gate of a
/// forked agent: forks declare the parent's tools (so their requests share the parent's cached
/// prefix) but may call none of them unless their builder sets a gate.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

#[async_trait]
impl PermissionGate for DenyAll {
    async fn check(&self, call: &ToolCallRequest, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Deny(format!(
            "{} is not available in this task; answer with text only",
            call.name
        ))
    }
}

/// A containment check: `Ok` when the path is inside the allowed scope, else why not.
pub type ContainsFn = Arc<dyn Fn(&std::path::Path) -> Result<(), String> + Send + Sync>;

/// A gate that allows read-only tools and writes whose every target lies inside one of the given
/// roots; everything else is denied with a readable reason. The `contains` function is the single
/// containment check (the memory crate passes its symlink-resolving gate).
pub struct WriteScopeGate {
    contains: ContainsFn,
    allow_shell: bool,
}

impl std::fmt::Debug for WriteScopeGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteScopeGate")
            .field("allow_shell", &self.allow_shell)
            .finish_non_exhaustive()
    }
}

impl WriteScopeGate {
    /// A gate whose writes must pass `contains` (Ok = inside the allowed scope). Shell tools are
    /// denied unless [`allow_read_only_shell`](Self::allow_read_only_shell) is set, in which case
    /// they are allowed only when the tool declares the call read-only by returning no write
    /// targets and an effect of `ReadOnly` (see the shell tool's own classification).
    pub fn new(
        contains: impl Fn(&std::path::Path) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        Self {
            contains: Arc::new(contains),
            allow_shell: false,
        }
    }

    /// Allow shell tools (builder style). Only do this for shell tools that refuse writes
    /// themselves.
    pub fn allow_read_only_shell(mut self, allow: bool) -> Self {
        self.allow_shell = allow;
        self
    }
}

#[async_trait]
impl PermissionGate for WriteScopeGate {
    async fn check(&self, call: &ToolCallRequest, _ctx: &ToolContext) -> PermissionDecision {
        match call.effect {
            ToolEffect::ReadOnly => PermissionDecision::Allow,
            ToolEffect::WritesFiles => match &call.write_targets {
                Err(why) => PermissionDecision::Deny(format!(
                    "Permission denied: cannot determine what {} would write ({why})",
                    call.name
                )),
                Ok(targets) if targets.is_empty() => PermissionDecision::Deny(format!(
                    "Permission denied: {} did not name the file it writes",
                    call.name
                )),
                Ok(targets) => {
                    for t in targets {
                        if let Err(why) = (self.contains)(t) {
                            return PermissionDecision::Deny(format!(
                                "Permission denied: {} may only write inside the memory directory: {why}",
                                call.name
                            ));
                        }
                    }
                    PermissionDecision::Allow
                }
            },
            ToolEffect::Shell if self.allow_shell => match &call.write_targets {
                Ok(t) if t.is_empty() => PermissionDecision::Allow,
                _ => PermissionDecision::Deny(format!(
                    "Permission denied: {} may only run read-only commands here",
                    call.name
                )),
            },
            ToolEffect::Shell | ToolEffect::Other => PermissionDecision::Deny(format!(
                "Permission denied: {} is not available to this agent (only read-only tools and \
                 writes inside the memory directory are allowed)",
                call.name
            )),
        }
    }
}

impl std::fmt::Debug for dyn PermissionGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PermissionGate")
    }
}
