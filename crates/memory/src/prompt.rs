//! The memory section of the system prompt: guidance (from `templates/memory_prompt.md`) plus
//! the session's capped view of `MEMORY.md`.

use async_trait::async_trait;
use memloop_core::prompt::SystemSection;
use memloop_host::env::EnvVars;
use memloop_store::MemoryStore;
use memloop_store::{MemoryScope, TEAM_DIR};
use memloop_text::render_template;
use std::sync::Arc;

const TEMPLATE: &str = include_str!("../templates/memory_prompt.md");
const KINDS_FULL: &str = include_str!("../templates/memory_kinds.md");
const KINDS_BRIEF: &str = include_str!("../templates/memory_kinds_brief.md");

/// How the memory section describes the four kinds of memory.
///
/// The full guidance (when to save each kind, how to use it, how to write its body, examples)
/// is about 500 tokens; the brief one (a paragraph and one example per kind) about 280. A model
/// whose whole window is a few thousand tokens cannot afford the full text beside a
/// conversation, so [`Guidance::for_window`] picks the brief one below 32,768 tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Guidance {
    /// When to save, how to use, body structure and examples for each kind (the default).
    #[default]
    Full,
    /// One paragraph and one example per kind, for small context windows.
    Brief,
}

impl Guidance {
    /// Windows below this many tokens get [`Guidance::Brief`] from [`Guidance::for_window`].
    pub const BRIEF_BELOW_TOKENS: u64 = 32_768;

    /// The guidance that fits a model with a `tokens`-token context window.
    ///
    /// ```
    /// use memloop_memory::prompt::Guidance;
    /// assert_eq!(Guidance::for_window(2_048), Guidance::Brief);
    /// assert_eq!(Guidance::for_window(200_000), Guidance::Full);
    /// ```
    pub fn for_window(tokens: u64) -> Self {
        match tokens < Self::BRIEF_BELOW_TOKENS {
            true => Self::Brief,
            false => Self::Full,
        }
    }

    fn kinds(self) -> &'static str {
        match self {
            Self::Full => KINDS_FULL,
            Self::Brief => KINDS_BRIEF,
        }
        .trim_end()
    }
}
const TEAM_GUIDANCE: &str = include_str!("../templates/team_memory.md");

/// The guidance on which memory goes where (private or team), for the memory section and the
/// extractor's prompt.
pub(crate) fn team_guidance(memory_dir: &str) -> String {
    let dir = memory_dir.trim_end_matches(['/', '\\']);
    let team_dir = format!("{dir}/{TEAM_DIR}/");
    render_template(
        TEAM_GUIDANCE,
        &[("memory_dir", dir), ("team_dir", &team_dir)],
    )
}

/// The memory section of the system prompt. Computed once per session (the agent caches
/// sections) from the store's capped index; `None` when memory is disabled.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memloop_core::prompt::SystemSection;
/// use memloop_files::FileMemoryStore;
/// use memloop_memory::prompt::MemorySection;
/// use std::sync::Arc;
/// let dir = tempfile::tempdir()?;
/// let section = MemorySection::new(Arc::new(FileMemoryStore::open(dir.path())?));
/// let text = section.compute().await.unwrap();
/// assert!(text.contains("MEMORY.md is empty"));
/// # Ok(()) }
/// ```
pub struct MemorySection {
    store: Arc<dyn MemoryStore>,
    enabled: bool,
    extra: Option<String>,
    daily_log: bool,
    team: bool,
    agent_scope: Option<memloop_paths::AgentMemoryScope>,
    guidance: Guidance,
}

impl MemorySection {
    /// Section name.
    pub const NAME: &'static str = "memory";

    /// A section over `store`.
    pub fn new(store: Arc<dyn MemoryStore>) -> Self {
        Self {
            store,
            enabled: true,
            extra: None,
            daily_log: false,
            team: false,
            agent_scope: None,
            guidance: Guidance::Full,
        }
    }

    /// A section that is off when `MEMLOOP_DISABLE_AUTO_MEMORY` or `MEMLOOP_SIMPLE` is truthy in `env`, shows team
    /// memory when `MEMLOOP_TEAM_MEMORY` is, with the text of `MEMLOOP_MEMORY_EXTRA_GUIDELINES`
    /// (when set and not blank) appended.
    pub fn from_env(store: Arc<dyn MemoryStore>, env: &EnvVars) -> Self {
        let section = Self::new(store)
            .enabled(memloop_paths::env::memory_enabled(env))
            .team(env.switch(memloop_paths::env::TEAM_MEMORY));
        match env.get(memloop_paths::env::MEMORY_EXTRA_GUIDELINES) {
            Some(extra) => section.extra_guidelines(extra),
            None => section,
        }
    }

    /// Daily-log mode: the guidance tells the agent to append one line per fact to today's log
    /// with `memory_log_append` instead of writing topic files (the extractor's rule too); the
    /// agent needs the [`DailyLogTool`](crate::dream::DailyLogTool).
    pub fn daily_log(mut self, on: bool) -> Self {
        self.daily_log = on;
        self
    }

    /// Private and team memory ([`MemoryScope`]): the guidance gains the rule for which memory
    /// goes where (`user` memories private; shared conventions, project facts and references to
    /// the team; never secrets in team memory), and the team's own index (`team/MEMORY.md`)
    /// follows the private one.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use memloop_core::prompt::SystemSection;
    /// use memloop_memory::prompt::MemorySection;
    /// use memloop_files::FileMemoryStore;
    /// use memloop_store::*;
    /// use std::sync::Arc;
    /// let dir = tempfile::tempdir()?;
    /// let store = FileMemoryStore::open(dir.path())?;
    /// let doc = MemoryDoc::new("发布流程", "每周二发布", MemoryType::Project, "周二下午发布。");
    /// store.write("team/release.md", &doc, WriteMode::Overwrite).await?;
    /// let text = MemorySection::new(Arc::new(store)).team(true).compute().await.unwrap();
    /// assert!(text.contains("## Team index (team/MEMORY.md)\n\n- [发布流程](release.md) — 每周二发布"));
    /// # Ok(()) }
    /// ```
    pub fn team(mut self, on: bool) -> Self {
        self.team = on;
        self
    }

    /// A sub-agent's own memory in `scope`: the guidance gains the line saying who shares it
    /// ([`agent_scope_guidance`]).
    pub fn agent_scope(mut self, scope: memloop_paths::AgentMemoryScope) -> Self {
        self.agent_scope = Some(scope);
        self
    }

    /// Describe the kinds of memory in full (the default) or briefly, for small windows.
    pub fn guidance(mut self, guidance: Guidance) -> Self {
        self.guidance = guidance;
        self
    }

    /// Append `text` to the guidance, under "Additional guidelines" (blank text adds nothing).
    pub fn extra_guidelines(mut self, text: &str) -> Self {
        let text = text.trim();
        self.extra = (!text.is_empty()).then(|| text.to_owned());
        self
    }

    /// Turn the section off (e.g. when `MEMLOOP_DISABLE_AUTO_MEMORY` is truthy): it renders
    /// nothing and no index is loaded.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Render the guidance around a given index text.
    pub fn render(memory_dir: &str, index: &str) -> String {
        render_sections(memory_dir, index, None, Guidance::Full)
    }
}

impl MemorySection {
    async fn index_text(&self, scope: MemoryScope) -> String {
        let file = scope.index_file();
        match self.store.load_scope_index(scope).await {
            Ok(ix) => ix.content,
            Err(e) => {
                tracing::warn!(error = %e, file, "could not load an index for the system prompt");
                format!("({file} could not be read: {e})")
            }
        }
    }
}

/// The line a sub-agent's memory prompt carries for its scope: who else sees the memories, and
/// so what to write in them.
///
/// ```
/// use memloop_memory::prompt::agent_scope_guidance;
/// use memloop_paths::AgentMemoryScope;
/// assert!(agent_scope_guidance(AgentMemoryScope::Local).contains("not checked in"));
/// ```
pub fn agent_scope_guidance(scope: memloop_paths::AgentMemoryScope) -> &'static str {
    use memloop_paths::AgentMemoryScope as S;
    match scope {
        S::User => {
            "This is user-scope memory: it follows you into every project, so keep what you \
             learn general, not tied to one project's code or names."
        }
        S::Project => {
            "This is project-scope memory: it lives in the project and is shared with the team \
             through version control, so write what every teammate's agent should know."
        }
        S::Local => {
            "This is local-scope memory: it stays on this machine only and is not checked in, \
             so it may hold what is specific to this checkout or this user's setup."
        }
    }
}

/// The guidance around the private index, and with team memory on, the scope rule and the team
/// index after it.
fn render_sections(
    memory_dir: &str,
    index: &str,
    team_index: Option<&str>,
    guidance: Guidance,
) -> String {
    let empty = |text: &str, what: &'static str| -> String {
        match text.trim().is_empty() {
            true => what.to_owned(),
            false => text.to_owned(),
        }
    };
    let index = empty(
        index,
        "MEMORY.md is empty: no memories have been saved yet.",
    );
    let (scopes, team) = match team_index {
        Some(team) => (
            format!("\n{}\n", team_guidance(memory_dir).trim_end()),
            format!(
                "\n\n## Team index (team/MEMORY.md)\n\n{}",
                empty(team, "team/MEMORY.md is empty: no team memories yet.")
            ),
        ),
        None => (String::new(), String::new()),
    };
    render_template(
        TEMPLATE,
        &[
            ("memory_dir", memory_dir),
            ("kinds", guidance.kinds()),
            ("index", &index),
            ("scopes", &scopes),
            ("team_index", &team),
        ],
    )
}

#[async_trait]
impl SystemSection for MemorySection {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn compute(&self) -> Option<String> {
        if !self.enabled {
            return None;
        }
        let dir = self.store.describe().to_string();
        let index = self.index_text(MemoryScope::Private).await;
        let team = match self.team {
            true => Some(self.index_text(MemoryScope::Team).await),
            false => None,
        };
        let mut text = render_sections(&dir, &index, team.as_deref(), self.guidance);
        if self.daily_log {
            text.push_str("\n\n## Daily-log mode\n\n");
            text.push_str(crate::daily_log::DAILY_LOG_GUIDANCE.trim());
            text.push_str(" This replaces \"How to save\" above.");
        }
        if let Some(scope) = self.agent_scope {
            text.push_str("\n\n## Scope of this memory\n\n");
            text.push_str(agent_scope_guidance(scope));
        }
        if let Some(extra) = &self.extra {
            text.push_str("\n\n## Additional guidelines\n\n");
            text.push_str(extra);
        }
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::Guidance;

    /// Both forms name the four kinds and the `**Why:**` rule; the brief one is the shorter.
    #[test]
    fn both_guidances_cover_the_four_kinds() {
        for guidance in [Guidance::Full, Guidance::Brief] {
            let text = super::render_sections("/m", "", None, guidance);
            for kind in ["user", "feedback", "project", "reference"] {
                assert!(
                    text.contains(&format!("**{kind}**")) || text.contains(&format!("### {kind}"))
                );
            }
            assert!(text.contains("**Why:**") && !text.contains("{{"), "{text}");
        }
        let len = |g| super::render_sections("/m", "", None, g).len();
        assert!(len(Guidance::Brief) + 600 < len(Guidance::Full));
    }
    #[test]
    fn team_guidance_names_both_dirs() {
        let text = super::team_guidance("/home/李雷/.memloop/projects/app/memory/");
        assert!(text.contains("`/home/李雷/.memloop/projects/app/memory`"));
        assert!(text.contains("`/home/李雷/.memloop/projects/app/memory/team/`"));
        assert!(!text.contains("{{"));
    }
}
