//! [`KeywordSelector`]: matches query words against each memory's name and description. No
//! model, no body reads: a linear pass over the headers (their analysed words are memoised by
//! path and mtime).

use super::selector::{SelectionContext, Selector, SelectorError};
use async_trait::async_trait;
use memloop_store::MemoryHeader;
use memloop_text::{Analyzer, Language, tokens};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::SystemTime;

/// Weights of [`KeywordSelector`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeywordConfig {
    /// Weight of a query term found in the name (or the file name when there is no name).
    pub name_weight: f32,
    /// Weight of a query term found in the description.
    pub description_weight: f32,
    /// The language of Latin-script words in every memory and query (`Some`), or detected per
    /// memory (`None`, the default): the query is compared with each memory in the memory's
    /// language (see [`Analyzer`]).
    pub language: Option<Language>,
}

impl Default for KeywordConfig {
    fn default() -> Self {
        Self {
            name_weight: 2.0,
            description_weight: 1.0,
            language: None,
        }
    }
}

/// Scores each memory by the query terms (stemmed, stop words removed) its name and description
/// contain, each term weighted by its rarity among the memories (`ln(1 + N/df)`). Ties keep the
/// newest first. Memories matching no term are never selected.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_recall::{KeywordSelector, SelectionContext, Selector};
/// use memloop_store::MemoryHeader;
/// use std::sync::Arc;
/// let h = |p: &str, d: &str| MemoryHeader { rel_path: p.into(), name: None,
///     description: Some(d.into()), memory_type: None, mtime: std::time::SystemTime::UNIX_EPOCH };
/// let headers = vec![h("db.md", "integration tests hit a real database"), h("ui.md", "colour scheme")];
/// let sel: Arc<dyn Selector> = Arc::new(KeywordSelector::default());
/// let got = sel.select_checked("how do the database tests work?", &headers, &SelectionContext::default()).await.unwrap();
/// assert_eq!(got, vec!["db.md"]);
/// # }
/// ```
#[derive(Debug)]
pub struct KeywordSelector {
    config: KeywordConfig,
    analyzer: Analyzer,
    cache: Mutex<HashMap<String, Analyzed>>,
}

/// The analysed name and description of one memory at one mtime.
#[derive(Debug)]
struct Analyzed {
    mtime: SystemTime,
    name: Vec<String>,
    description: Vec<String>,
    lang: Language,
}

impl Default for KeywordSelector {
    fn default() -> Self {
        Self::new(KeywordConfig::default())
    }
}

impl KeywordSelector {
    /// A keyword selector with these weights.
    pub fn new(config: KeywordConfig) -> Self {
        Self {
            config,
            analyzer: Analyzer::new(false).with_language(config.language),
            cache: Mutex::default(),
        }
    }

    /// The query's terms found in each header's name and description, the query analysed in
    /// the language of each memory.
    fn matches(
        &self,
        headers: &[&MemoryHeader],
        query: &str,
    ) -> Vec<(HashSet<String>, HashSet<String>)> {
        let mut guard = self.cache.lock().ok();
        let mut fresh = HashMap::new();
        let cache = guard.as_deref_mut().unwrap_or(&mut fresh);
        if cache.len() > 2 * headers.len() + 64 {
            let live: HashSet<&str> = headers.iter().map(|h| h.rel_path.as_str()).collect();
            cache.retain(|p, _| live.contains(p.as_str()));
        }
        // The query's terms in each memory language met so far (by `Language::ALL` position).
        let mut query_terms: [Option<HashSet<String>>; Language::ALL.len()] =
            std::array::from_fn(|_| None);
        headers
            .iter()
            .map(|h| {
                if cache.get(&h.rel_path).is_none_or(|e| e.mtime != h.mtime) {
                    let name = display_name(h);
                    let description = h.description.as_deref().unwrap_or("");
                    let lang = self.analyzer.language().unwrap_or_else(|| {
                        self.analyzer.language_of(&format!("{name}\n{description}"))
                    });
                    let analyzed = Analyzed {
                        mtime: h.mtime,
                        name: self.analyzer.terms_in(name, lang),
                        description: self.analyzer.terms_in(description, lang),
                        lang,
                    };
                    cache.insert(h.rel_path.clone(), analyzed);
                }
                let Some(e) = cache.get(&h.rel_path) else {
                    return Default::default();
                };
                let Some(slot) = query_terms.get_mut(e.lang.index()) else {
                    return Default::default();
                };
                let query = slot.get_or_insert_with(|| {
                    self.analyzer.terms_in(query, e.lang).into_iter().collect()
                });
                let pick = |terms: &[String]| -> HashSet<String> {
                    terms
                        .iter()
                        .filter(|t| query.contains(*t))
                        .cloned()
                        .collect()
                };
                (pick(&e.name), pick(&e.description))
            })
            .collect()
    }
}

/// The name to match: the frontmatter name, else the file stem.
pub(crate) fn display_name(h: &MemoryHeader) -> &str {
    match h.name.as_deref() {
        Some(n) if !n.trim().is_empty() => n,
        _ => {
            let file = h.rel_path.rsplit('/').next().unwrap_or(&h.rel_path);
            file.strip_suffix(".md").unwrap_or(file)
        }
    }
}

#[async_trait]
impl Selector for KeywordSelector {
    fn name(&self) -> &'static str {
        "keyword"
    }

    async fn select(
        &self,
        query: &str,
        headers: &[MemoryHeader],
        ctx: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        if tokens(query).is_empty() {
            return Ok(Vec::new());
        }
        let headers: Vec<&MemoryHeader> = headers
            .iter()
            .filter(|h| !ctx.already_surfaced.contains(&h.rel_path))
            .collect();
        let docs = self.matches(&headers, query);
        let mut df: HashMap<&str, usize> = HashMap::new();
        for (name, desc) in &docs {
            for t in name.union(desc) {
                *df.entry(t.as_str()).or_default() += 1;
            }
        }
        let n = headers.len() as f32;
        let idf = |t: &str| (1.0 + n / df.get(t).copied().unwrap_or(1) as f32).ln();
        let mut scored: Vec<(f32, usize)> = docs
            .iter()
            .enumerate()
            .filter_map(|(i, (name, desc))| {
                let s: f32 = name
                    .iter()
                    .map(|t| self.config.name_weight * idf(t))
                    .chain(desc.iter().map(|t| self.config.description_weight * idf(t)))
                    .sum();
                (s > 0.0).then_some((s, i))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        Ok(scored
            .into_iter()
            .take(ctx.limit)
            .map(|(_, i)| headers[i].rel_path.clone())
            .collect())
    }
}
