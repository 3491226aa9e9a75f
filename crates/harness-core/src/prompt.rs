//! System-prompt sections, computed once per session and cached.
//!
//! Providers cache prompts by prefix, so the system prompt must not change from one request to
//! the next. Each [`SystemSection`] is computed the first time it is needed and reused until the
//! cache is invalidated (`clear`, compaction, or an explicit [`SystemPrompt::invalidate`]).

use async_trait::async_trait;
use std::sync::Arc;
use tokio::sync::Mutex;

/// One named part of the system prompt.
///
/// ```
/// use memloop_core::prompt::SystemSection;
///
/// struct Persona;
///
/// #[async_trait::async_trait]
/// impl SystemSection for Persona {
///     fn name(&self) -> &str { "persona" }
///     async fn compute(&self) -> Option<String> { Some("You are a careful coding agent.".into()) }
/// }
/// ```
#[async_trait]
pub trait SystemSection: Send + Sync {
    /// Stable name (used to invalidate one section).
    fn name(&self) -> &str;

    /// The section text, or `None` to leave it out.
    async fn compute(&self) -> Option<String>;
}

/// A fixed text section.
#[derive(Debug, Clone)]
pub struct StaticSection {
    name: String,
    text: String,
}

impl StaticSection {
    /// A section that is always `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            text: text.into(),
        }
    }
}

#[async_trait]
impl SystemSection for StaticSection {
    fn name(&self) -> &str {
        &self.name
    }

    async fn compute(&self) -> Option<String> {
        Some(self.text.clone())
    }
}

/// The ordered sections and their cached values.
#[derive(Default)]
pub struct SystemPrompt {
    sections: Vec<Arc<dyn SystemSection>>,
    cache: Mutex<Vec<Option<Option<String>>>>,
}

impl std::fmt::Debug for SystemPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.sections.iter().map(|s| s.name().to_owned()))
            .finish()
    }
}

impl SystemPrompt {
    /// An empty prompt.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append a section.
    pub fn push(&mut self, section: Arc<dyn SystemSection>) {
        self.sections.push(section);
        self.cache.get_mut().push(None);
    }

    /// Section names in order.
    pub fn names(&self) -> Vec<String> {
        self.sections.iter().map(|s| s.name().to_owned()).collect()
    }

    /// The rendered sections (computing those not cached yet), in order, omitting empty ones.
    pub async fn render(&self) -> Vec<String> {
        let mut cache = self.cache.lock().await;
        let mut out = Vec::with_capacity(self.sections.len());
        for (i, section) in self.sections.iter().enumerate() {
            if cache[i].is_none() {
                let value = section.compute().await;
                tracing::debug!(
                    section = section.name(),
                    bytes = value.as_ref().map_or(0, String::len),
                    "computed system section"
                );
                cache[i] = Some(value);
            }
            if let Some(Some(text)) = &cache[i] {
                out.push(text.clone());
            }
        }
        out
    }

    /// Drop every cached value; the next [`render`](Self::render) recomputes.
    pub async fn invalidate(&self) {
        self.cache.lock().await.iter_mut().for_each(|c| *c = None);
    }

    /// Drop one section's cached value.
    pub async fn invalidate_section(&self, name: &str) {
        let mut cache = self.cache.lock().await;
        for (i, s) in self.sections.iter().enumerate() {
            if s.name() == name {
                cache[i] = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Counting(AtomicU32);

    #[async_trait]
    impl SystemSection for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        async fn compute(&self) -> Option<String> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Some(format!("computed {n} times"))
        }
    }

    #[tokio::test]
    async fn sections_are_cached_until_invalidated() {
        let counting = Arc::new(Counting(AtomicU32::new(0)));
        let mut p = SystemPrompt::new();
        p.push(Arc::new(StaticSection::new("a", "static")));
        p.push(counting.clone());
        assert_eq!(p.render().await, vec!["static", "computed 1 times"]);
        assert_eq!(p.render().await, vec!["static", "computed 1 times"]);
        p.invalidate_section("a").await;
        assert_eq!(p.render().await, vec!["static", "computed 1 times"]);
        p.invalidate_section("counting").await;
        assert_eq!(p.render().await, vec!["static", "computed 2 times"]);
        p.invalidate().await;
        assert_eq!(p.render().await, vec!["static", "computed 3 times"]);
        assert_eq!(counting.0.load(Ordering::SeqCst), 3);
    }
}
