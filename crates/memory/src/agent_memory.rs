//! The memory of sub-agents: [`AgentMemory`], the
//! [`ChildExtension`] that gives a sub-agent whose definition
//! says `memory: <scope>` its own memory dir (resolved by
//! [`AgentMemoryScopes`]), the memory section of the system
//! prompt for it, and the memory tools bound to it; every other sub-agent gets no memory tools,
//! and no sub-agent may write into the parent's memory dir or another agent's.

use crate::prompt::MemorySection;
use crate::tools::{ANTHROPIC_MEMORY_TOOL, MEMORY_DELETE, MEMORY_READ, MEMORY_WRITE, memory_tools};
use async_trait::async_trait;
use memloop_core::prompt::SystemSection;
use memloop_core::tool::{
    PermissionDecision, PermissionGate, ToolCallRequest, ToolContext, ToolEffect,
};
use memloop_files::FileMemoryStore;
use memloop_files::resolve_existing_prefix;
use memloop_host::paths::normalize_lexically;
use memloop_paths::{AgentMemoryScope, AgentMemoryScopes};
use memloop_store::MemoryStore;
use memloop_subagents::MEMORY_KEY;
use memloop_subagents::{ChildExtension, ChildKit};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The tools bound to the parent's memory (its dir, its daily log, its notes, its past
/// sessions): a sub-agent never inherits them.
const PARENT_MEMORY_TOOLS: &[&str] = &[
    MEMORY_READ,
    MEMORY_WRITE,
    MEMORY_DELETE,
    ANTHROPIC_MEMORY_TOOL,
    crate::daily_log::MEMORY_LOG_APPEND,
    memloop_session_notes::EDIT_TOOL_NAME,
    memloop_transcripts::TRANSCRIPT_SEARCH,
];

/// The store-backed writes a sub-agent's own memory takes.
const OWN_MEMORY_WRITES: &[&str] = &[MEMORY_WRITE, MEMORY_DELETE];

/// Gives each sub-agent the memory its definition asks for (`memory: user | project | local`;
/// see [`memloop_subagents`]), and no other:
///
/// - with a scope: its memory dir ([`AgentMemoryScopes::resolve`] with the agent's name,
///   created when it first runs), the memory section of the system prompt for that dir (the
///   guidance and its `MEMORY.md`), and `memory_read` / `memory_write` / `memory_delete` bound
///   to it;
/// - without: no memory tools (a call to one is refused with a tool error saying the agent has
///   no memory);
/// - either way, none of the parent's memory tools, and a gate (wrapped around the sub-agent's
///   own) that refuses any write into a protected dir (the parent's memory dir, every agent
///   memory scope) unless it is a `memory_write` / `memory_delete` into the agent's own dir.
///   Writes are judged by the targets a tool declares, symlinks resolved; a shell command is
///   judged by the sub-agent's own gate only.
///
/// A definition asking for memory while memory is switched off ([`AgentMemory::off`]) runs
/// without it (logged).
#[derive(Debug, Clone)]
pub struct AgentMemory {
    scopes: Option<AgentMemoryScopes>,
    protected: Vec<PathBuf>,
}

impl AgentMemory {
    /// Memory in `scopes`; the roots of its three scopes are protected.
    pub fn new(scopes: AgentMemoryScopes) -> Self {
        let protected = AgentMemoryScope::ALL
            .into_iter()
            .map(|s| scopes.root(s))
            .collect();
        Self {
            scopes: Some(scopes),
            protected,
        }
    }

    /// No sub-agent gets memory (memory is switched off).
    pub fn off() -> Self {
        Self {
            scopes: None,
            protected: Vec::new(),
        }
    }

    /// Refuse sub-agents' writes inside `dir` too (the parent's memory dir) (builder style).
    pub fn protect(mut self, dir: impl Into<PathBuf>) -> Self {
        self.protected.push(dir.into());
        self
    }

    /// The own memory of the agent `kit` runs, if its definition asks for one.
    fn own_store(&self, kit: &ChildKit) -> Result<Option<OwnMemory>, String> {
        let Some(raw) = kit.definition.metadata.get(MEMORY_KEY) else {
            return Ok(None);
        };
        let scope: AgentMemoryScope = raw.parse()?;
        let Some(scopes) = &self.scopes else {
            tracing::warn!(agent = %kit.definition.name, %scope, "memory is switched off: the sub-agent runs without its memory");
            return Ok(None);
        };
        let dir = scopes
            .resolve(scope, &kit.definition.name)
            .map_err(|e| e.to_string())?;
        let store = FileMemoryStore::open(&dir.dir)
            .map_err(|e| format!("its {scope} memory dir cannot be opened: {e}"))?;
        tracing::debug!(agent = %kit.definition.name, %scope, dir = %dir.dir.display(), "sub-agent memory");
        Ok(Some((scope, Arc::new(store))))
    }
}

#[async_trait]
impl ChildExtension for AgentMemory {
    async fn equip(&self, kit: &mut ChildKit) -> Result<(), String> {
        let name = kit.definition.name.clone();
        let owned = self.own_store(kit)?;
        let own = owned.as_ref().map(|(_, store)| store.clone());
        let reason = match &own {
            None => format!(
                "agent `{name}` has no memory (its definition sets no `memory:` scope: user, \
                 project or local), so it cannot read or write any"
            ),
            Some(_) => format!("it belongs to the parent's memory, not agent `{name}`'s"),
        };
        for tool in PARENT_MEMORY_TOOLS {
            kit.withhold(tool, reason.clone());
        }
        if let Some((scope, store)) = &owned {
            for tool in memory_tools(store.clone()) {
                kit.give(tool);
            }
            let section = MemorySection::new(store.clone()).agent_scope(*scope);
            if let Some(section) = section.compute().await {
                kit.system.push(section);
            }
        }
        kit.gate = Arc::new(AgentMemoryGate {
            inner: kit.gate.clone(),
            agent: name,
            own,
            protected: self.protected.clone(),
        });
        Ok(())
    }
}

/// A sub-agent's own memory: its scope and its store.
type OwnMemory = (AgentMemoryScope, Arc<dyn MemoryStore>);

/// The sub-agent's gate, wrapped: writes into protected dirs are refused (see [`AgentMemory`]),
/// everything else is the wrapped gate's call.
struct AgentMemoryGate {
    inner: Arc<dyn PermissionGate>,
    agent: String,
    own: Option<Arc<dyn MemoryStore>>,
    protected: Vec<PathBuf>,
}

/// `path`, made absolute, normalised and with its existing prefix resolved through symlinks.
fn resolved(path: &Path) -> PathBuf {
    let normal = normalize_lexically(path);
    resolve_existing_prefix(&normal).unwrap_or(normal)
}

impl AgentMemoryGate {
    fn deny(&self, call: &ToolCallRequest, why: String) -> PermissionDecision {
        tracing::warn!(agent = %self.agent, tool = %call.name, reason = %why, "sub-agent write refused");
        PermissionDecision::Deny(format!("Permission denied: {why}"))
    }

    fn in_own(&self, target: &Path) -> bool {
        self.own
            .as_ref()
            .is_some_and(|s| s.memory_path_of(target).is_ok())
    }

    /// Why a write to `target` by `tool` is refused, if it is.
    fn refusal(&self, tool: &str, target: &Path) -> Option<String> {
        let own_writer = OWN_MEMORY_WRITES.contains(&tool);
        if self.in_own(target) {
            return (!own_writer).then(|| {
                format!(
                    "agent `{}` writes its memory only with {}, which check what is stored",
                    self.agent,
                    OWN_MEMORY_WRITES.join(" and ")
                )
            });
        }
        if own_writer && self.own.is_some() {
            return Some(format!(
                "{} of agent `{}` may only write inside its own memory dir, not {}",
                tool,
                self.agent,
                target.display()
            ));
        }
        let target = resolved(target);
        let zone = self
            .protected
            .iter()
            .find(|dir| target.starts_with(resolved(dir)))?;
        Some(format!(
            "agent `{}` may not write inside the memory dir {} ({})",
            self.agent,
            zone.display(),
            match &self.own {
                Some(own) => format!("its own memory is {}", own.describe()),
                None => "it has no memory".to_owned(),
            }
        ))
    }
}

#[async_trait]
impl PermissionGate for AgentMemoryGate {
    async fn check(&self, call: &ToolCallRequest, ctx: &ToolContext) -> PermissionDecision {
        if call.effect == ToolEffect::WritesFiles {
            if let Ok(targets) = &call.write_targets {
                for target in targets {
                    if let Some(why) = self.refusal(&call.name, target) {
                        return self.deny(call, why);
                    }
                }
            }
        }
        self.inner.check(call, ctx).await
    }
}
