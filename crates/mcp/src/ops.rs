//! The four tools' logic, independent of the MCP plumbing: each returns the JSON answer, or a
//! [`Refusal`] when the request itself is not acceptable (the project path, a target name).
//! A failing backend is not a refusal: the answer says `available: false` and why.

use crate::access::{Denied, Effect};
use crate::answer::{FilteredItem, Reply};
use crate::mapping::{EntryType, Scope, first_line};
use crate::pages;
use crate::projects::{NotServed, OpenFailed, OpenProject, Project, Projects};
use crate::tiers::{self, Detail};
use memloop_recall::Selector;
use memloop_store::{
    ExpectedVersion, Headers, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, WriteMode,
    content_version, validate_rel_path,
};
use rmcp::schemars;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// How many session summaries `context_load` inlines.
const RECENT_SESSIONS: usize = 3;
/// How many todos and decisions `context_load` lists at most.
const LOAD_LIST_CAP: usize = 50;
/// Most results one `context_search` returns.
pub const MAX_LIMIT: usize = 50;

/// The request cannot be served as asked (shown to the model as a tool error: `refused: true`,
/// the `reason`, and any `details`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Refusal {
    /// Why, for the model.
    pub reason: String,
    /// Machine-readable fields added to the error answer (a version conflict's `code`, `path`,
    /// `expected_version` and `current_version`).
    pub details: serde_json::Map<String, Value>,
}

impl Refusal {
    /// A refusal with only a reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            details: serde_json::Map::new(),
        }
    }
}

impl From<crate::projects::ProjectRefused> for Refusal {
    fn from(e: crate::projects::ProjectRefused) -> Self {
        Self::new(e.to_string())
    }
}

impl From<Denied> for Refusal {
    fn from(e: Denied) -> Self {
        let mut refusal = Self::new(e.to_string());
        refusal.details.insert("code".into(), json!("forbidden"));
        refusal
    }
}

impl From<NotServed> for Refusal {
    fn from(e: NotServed) -> Self {
        match e {
            NotServed::Refused(r) => r.into(),
            NotServed::Denied(d) => d.into(),
        }
    }
}

/// One entry of a `context_save` batch.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct SaveEntry {
    /// What kind of entry this is; decides the folder and the memory type.
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Short title (defaults to the first line of `content`). Decisions, knowledge and todos
    /// with the same title replace each other.
    #[serde(default)]
    pub title: Option<String>,
    /// The text to remember (Markdown). Never include credentials: they are refused.
    pub content: String,
    /// Optional tags, stored with the entry and searchable.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Store it once in the global memory shared by every project (e.g. knowledge that is not
    /// about this project) instead of the project's. Default false.
    #[serde(default)]
    pub global: bool,
    /// Replace the entry only if it is still at this version (the `version` a previous
    /// `context_load` / `context_search` / `context_save` answer gave for it); a changed entry
    /// is refused with code `version_conflict` and its current version. Without it, an entry
    /// with the same title is replaced whatever its version (the answer says `replaced`).
    #[serde(default)]
    pub expected_version: Option<String>,
}

/// What `context_manage` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ManageAction {
    /// List memories (optionally only those whose path starts with `target`, e.g. `todos/`).
    List,
    /// Delete the memory at `target` (a path as listed, e.g. `todos/fix-ci.md`).
    Delete,
    /// Replace the body of the memory at `target` with `content` (title and type kept). With
    /// `expected_version`, only if the memory is still at that version (a stale update is
    /// refused with the current version); without it, the memory as it is now.
    Update,
    /// Create the project's memory dir if it does not exist yet (its index, `MEMORY.md`, is
    /// written with the first saved entry).
    InitProject,
}

impl ManageAction {
    /// Whether the action only reads (`list`) or changes memory (the others).
    pub fn effect(self) -> Effect {
        match self {
            Self::List => Effect::Read,
            Self::Delete | Self::Update | Self::InitProject => Effect::Write,
        }
    }
}

/// What answers say of a project: its id and path (the client's own), whether it has memory,
/// and the store's kind (`files`, `postgres`). The memory dir, the rule that chose it and the
/// store's description (a database URL) only when the server reveals its store
/// ([`McpConfig::reveal_store`](crate::McpConfig::reveal_store)).
pub(crate) fn project_json(p: &Project) -> Value {
    let mut v = json!({
        "id": p.id,
        "path": p.path,
        "known": p.known(),
        "store": p.store.as_deref().unwrap_or(FILES),
    });
    if p.reveal
        && let Value::Object(map) = &mut v
    {
        if p.store.is_none() {
            map.insert("memory_dir".into(), json!(p.memory.dir));
        }
        map.insert("resolved_by".into(), json!(p.memory.rule.to_string()));
    }
    v
}

impl OpenFailed {
    /// The answer for `project` when its store was not opened: the refusal as a tool error, or
    /// `available: false` when the store failed.
    pub(crate) fn answer(self, project: &Project) -> Result<Value, Refusal> {
        match self {
            Self::NotServed(refused) => Err(refused.into()),
            Self::Store(e) => Ok(unavailable(project, e)),
        }
    }
}

/// The store kind answers name for memories kept in memory dirs.
const FILES: &str = "files";

/// The answer for a project whose store could not be opened. The reason (which names files,
/// hosts, URLs) goes to the log; the client reads it only when the server reveals its store.
pub(crate) fn unavailable(p: &Project, reason: impl std::fmt::Display) -> Value {
    tracing::warn!(project = %p.path.display(), %reason, "memory backend unavailable");
    let reason = if p.reveal {
        reason.to_string()
    } else {
        format!(
            "the {} store is unavailable (the server's log says why); retry later",
            p.store.as_deref().unwrap_or(FILES)
        )
    };
    json!({ "project": project_json(p), "available": false, "reason": reason })
}

fn title_of(h: &MemoryHeader) -> String {
    h.name.clone().unwrap_or_else(|| {
        h.rel_path
            .rsplit('/')
            .next()
            .unwrap_or(&h.rel_path)
            .trim_end_matches(".md")
            .to_owned()
    })
}

fn header_json(h: &MemoryHeader) -> Value {
    json!({
        "path": h.rel_path,
        "title": title_of(h),
        "description": h.description,
        "type": h.memory_type.map(|t| t.as_str()),
        "modified": h.modified_rfc3339(),
    })
}

/// A memory's header and, when it was read (`None`: it could not be; the header alone), its
/// body at `detail` ([`tiers::body_fields`]) and version.
fn header_with_file(h: &MemoryHeader, file: Option<&MemoryFile>, detail: Detail) -> Value {
    let mut v = header_json(h);
    if let (Value::Object(map), Some(file)) = (&mut v, file) {
        map.extend(tiers::body_fields(&file.body, detail));
        map.insert("version".into(), json!(content_version(&file.raw)));
    }
    v
}

/// The version a client sent, checked: 64 hex digits ([`content_version`]).
pub(crate) fn expected_of(raw: Option<&str>) -> Result<ExpectedVersion, Refusal> {
    match raw.map(str::trim) {
        None => Ok(ExpectedVersion::Any),
        Some(v) if v.len() == 64 && v.chars().all(|c| c.is_ascii_hexdigit()) => {
            Ok(ExpectedVersion::Is(v.to_ascii_lowercase()))
        }
        Some(v) => Err(Refusal::new(format!(
            "expected_version `{}` is not a version: use the 64-hex-digit `version` of a \
             context_load, context_search or context_save answer",
            v.chars().take(80).collect::<String>()
        ))),
    }
}

/// A version conflict as a tool error: the reason and the machine-readable fields.
fn conflict_refusal(what: &str, e: &MemoryError) -> Option<Refusal> {
    let MemoryError::VersionConflict {
        path,
        expected,
        current,
    } = e
    else {
        return None;
    };
    let mut r = Refusal::new(format!(
        "{what} refused: the memory changed since you read it (expected version {expected}, \
         current version {current}); read it again (context_search or context_load), merge, \
         and retry with the current version"
    ));
    r.details.insert("code".into(), json!("version_conflict"));
    r.details.insert("path".into(), json!(path));
    r.details.insert("expected_version".into(), json!(expected));
    let current = (current != "none").then_some(current);
    r.details.insert("current_version".into(), json!(current));
    Some(r)
}

/// The hint an unregistered project gets.
const INIT_HINT: &str = "this project has no memory yet: call context_manage with action \
                         init_project (or save entries with context_save) to start one";

/// The day of an RFC 3339 time (`2026-02-28`).
fn day_of(rfc3339: &str) -> String {
    rfc3339.chars().take(10).collect()
}

/// `context_load`: the seed's shape (`project_id`, `registered`, `last_session`, `summary`,
/// `recent_sessions[{date, summary}]`, `pending_items`, `active_decisions` as strings) plus
/// memloop's details (`project`, `index`, `open_todos`, `decisions`, `global_knowledge`).
/// Sessions and todos carry their overview (L1) as `content` unless `detail` is `full`; lists
/// carry the one-line abstract (L0, `description`).
pub async fn load(projects: &Projects, project: Project, detail: Detail) -> Result<Value, Refusal> {
    let global = global_listing(projects).await;
    let open = match projects.open_read(&project).await {
        Ok(Some(open)) => open,
        Ok(None) => {
            return Ok(json!({
                "project_id": project.id,
                "registered": false,
                "project": project_json(&project),
                "available": true,
                "known": false,
                "hint": INIT_HINT,
                "global_knowledge": global,
            }));
        }
        Err(e) => return e.answer(&project),
    };
    let store = open.store.as_ref();
    // The headers from the project's cache (one change-feed question, not a scan), asked
    // while the store builds its index.
    let (headers, index) = match tokio::join!(open.headers.headers(), store.load_index()) {
        (Ok(h), Ok(i)) => (h, i),
        (Err(e), _) | (_, Err(e)) => return Ok(unavailable(&project, e)),
    };
    // The newest of a folder, at most a list's cap, each title and description cut as a list
    // item's are: at any number of memories the answer stays within the cap, uncut.
    // From the cache's folder view: O(cap) whatever the project's size.
    let in_folder = |f: &'static str| -> Vec<MemoryHeader> {
        headers
            .newest_in(f)
            .take(LOAD_LIST_CAP)
            .map(pages::bounded_header)
            .collect()
    };
    let sessions = in_folder("sessions/");
    let todo_headers = in_folder("todos/");
    // The recent sessions and the open todos, read together (one query on a database).
    let shown: Vec<MemoryHeader> = sessions
        .iter()
        .take(RECENT_SESSIONS)
        .chain(&todo_headers)
        .cloned()
        .collect();
    let mut files = open.headers.read_many(&shown).await.into_iter();
    let mut recent = Vec::new();
    for h in sessions.iter().take(RECENT_SESSIONS) {
        // Read once: its body at `detail` and its overview come from the same text.
        let file = files.next().and_then(Result::ok);
        let mut v = header_with_file(h, file.as_deref(), detail);
        let l1 = match &file {
            Some(f) => tiers::l1(&tiers::split(&f.body)).0,
            None => h.description.clone().unwrap_or_default(),
        };
        if let Value::Object(map) = &mut v {
            map.insert("date".into(), json!(day_of(&h.modified_rfc3339())));
            map.insert("summary".into(), json!(l1));
        }
        recent.push(v);
    }
    let todos: Vec<Value> = todo_headers
        .iter()
        .map(|h| header_with_file(h, files.next().and_then(Result::ok).as_deref(), detail))
        .collect();
    let decisions = in_folder("decisions/");
    let line = |h: &MemoryHeader| {
        let title = title_of(h);
        match h.description.as_deref() {
            Some(d) if !d.is_empty() && d != title => format!("{title}: {d}"),
            _ => title,
        }
    };
    let count = |f: &str| headers.count(f);
    let counts = json!({
        "sessions": count("sessions/"),
        "decisions": count("decisions/"),
        "changes": count("changes/"),
        "knowledge": count("knowledge/"),
        "todos": count("todos/"),
    });
    // Knowledge is only named in the overview: its newest few, not a list's worth.
    let knowledge: Vec<String> = headers
        .newest_in("knowledge/")
        .take(OVERVIEW_ITEMS)
        .map(|h| title_of(&pages::bounded_header(h)))
        .collect();
    let last = recent
        .first()
        .and_then(|v| Some((v["date"].as_str()?, v["summary"].as_str()?)));
    let todo_titles: Vec<String> = todo_headers.iter().map(title_of).collect();
    let summary = overview(
        &project,
        headers.len(),
        last,
        [
            (
                "Decided",
                &decisions.iter().map(title_of).collect::<Vec<_>>(),
                count("decisions/"),
            ),
            ("Open", &todo_titles, count("todos/")),
            ("Known", &knowledge, count("knowledge/")),
        ],
    );
    let mut answer = json!({
        "project_id": project.id,
        "registered": true,
        "last_session": sessions.first().map(|h| h.modified_rfc3339()),
        "summary": summary,
        "pending_items": todo_titles,
        "active_decisions": decisions.iter().map(line).collect::<Vec<_>>(),
        "detail": detail_name(detail),
        "project": project_json(&project),
        "available": true,
        "known": true,
        "memories": headers.len(),
        // The lines and the warning apart: the lines stay the same string while the project
        // grows past the caps (the warning names its size), so they are found clean once, not
        // scanned for credentials on every load.
        "index": {
            "content": index.loaded_lines(),
            "truncated": index.truncated_by_lines || index.truncated_by_bytes,
            "warning": index.warning,
        },
    });
    // The values already made go in as they are (`json!` would copy each once more).
    if let Value::Object(map) = &mut answer {
        map.insert("counts".into(), counts);
        map.insert("recent_sessions".into(), Value::Array(recent));
        map.insert("open_todos".into(), Value::Array(todos));
        map.insert(
            "decisions".into(),
            Value::Array(decisions.iter().map(header_json).collect()),
        );
        map.insert("global_knowledge".into(), Value::Array(global));
    }
    Ok(answer)
}

/// Items of each kind an overview names.
const OVERVIEW_ITEMS: usize = 3;
/// Longest excerpt of the last session an overview quotes, in characters.
const OVERVIEW_SESSION_CHARS: usize = 240;

/// `context_load`'s `summary`: a short overview of the project, in prose a model reads at the
/// start of a session: its name and size, the last session (date and the first line of its
/// overview), then the newest decisions, open todos and knowledge by title, each kind as its
/// label, its newest titles (the overview names the first [`OVERVIEW_ITEMS`]) and
/// how many memories of the kind there are.
fn overview(
    project: &Project,
    memories: usize,
    last_session: Option<(&str, &str)>,
    kinds: [(&str, &[String], usize); 3],
) -> String {
    let name = project
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| project.path.display().to_string());
    let mut out = format!(
        "{name}: {memories} {}.",
        if memories == 1 { "memory" } else { "memories" }
    );
    if let Some((date, text)) = last_session {
        let line = first_line(text, OVERVIEW_SESSION_CHARS);
        out.push_str(&format!(" Last session ({date}): {line}"));
        if !line.ends_with(['.', '。', '!', '?', '！', '？', '…']) {
            out.push('.');
        }
    }
    for (label, items, total) in kinds {
        if items.is_empty() {
            continue;
        }
        let shown: Vec<&str> = items
            .iter()
            .take(OVERVIEW_ITEMS)
            .map(String::as_str)
            .collect();
        out.push_str(&format!(" {label}: {}", shown.join("; ")));
        if total > shown.len() {
            out.push_str(&format!(" (+{} more)", total - shown.len()));
        }
        out.push('.');
    }
    out
}

/// The prefix of global memories' paths in answers and targets.
pub const GLOBAL_PREFIX: &str = "global/";

/// The global memory's path a `context_manage` target names (`global/decisions/x.md`), if it
/// names one.
pub(crate) fn global_target(target: Option<&str>) -> Option<&str> {
    target.and_then(|t| t.trim().strip_prefix(GLOBAL_PREFIX))
}

/// A search hit: the memory, its score (none when listing), and whether it is global.
struct Hit {
    header: MemoryHeader,
    score: Option<f32>,
    /// Relevance in 0..1 within its store's ranking.
    relevance: f32,
    global: bool,
}

/// One store's search: the hits, how they were ranked (`hybrid`, `bm25`, `listing`) and why
/// it degraded, if it did.
struct StoreSearch {
    hits: Vec<Hit>,
    mode: &'static str,
    reason: Option<String>,
}

/// Search one store: ranked hits (relevance relative to the best BM25F score, or by rank
/// when the hybrid selector ranked them), or, when ranking fails, the newest in scope.
async fn search_store(
    open: &OpenProject,
    query: &str,
    scope: Scope,
    limit: usize,
    global: bool,
) -> Result<StoreSearch, MemoryError> {
    let all = open.headers.headers().await?;
    let filtered: Vec<MemoryHeader>;
    let in_scope: &[MemoryHeader] = if matches!(scope, Scope::All) {
        all.as_slice()
    } else {
        filtered = all
            .iter()
            .filter(|h| scope.contains(&h.rel_path))
            .cloned()
            .collect();
        &filtered
    };
    let hit = |h: &MemoryHeader, score, relevance| Hit {
        header: h.clone(),
        score,
        relevance,
        global,
    };
    Ok(match ranked(open, query, in_scope, scope, limit).await {
        Ok(r) => {
            let n = r.scored.len().max(1) as f32;
            let top = r.scored.iter().map(|(_, s)| *s).fold(0.0f32, f32::max);
            let hits = r
                .scored
                .iter()
                .enumerate()
                .filter_map(|(i, (p, s))| {
                    let relevance = if r.mode == "hybrid" {
                        1.0 - i as f32 / n
                    } else if top > 0.0 {
                        (s / top).clamp(0.0, 1.0)
                    } else {
                        0.0
                    };
                    all.get(p)
                        .filter(|h| scope.contains(&h.rel_path))
                        .map(|h| hit(h, Some(*s), relevance))
                })
                .collect();
            StoreSearch {
                hits,
                mode: r.mode,
                reason: r.degraded,
            }
        }
        Err(e) => StoreSearch {
            hits: in_scope
                .iter()
                .take(limit)
                .map(|h| hit(h, None, 0.0))
                .collect(),
            mode: "listing",
            reason: Some(e),
        },
    })
}

/// The kind of a memory for search results (`session`, `decision`, ...), from its folder.
fn kind_of(rel_path: &str) -> &'static str {
    match rel_path.split('/').next() {
        Some("sessions") => "session",
        Some("decisions") => "decision",
        Some("changes") => "change",
        Some("knowledge") => "knowledge",
        Some("todos") => "todo",
        _ => "memory",
    }
}

/// `context_search`: BM25F through the recall layer's selector over the project's memories and
/// the global ones; when ranking fails, the memories in scope newest first (`mode: "listing"`).
/// Each result has the seed's fields (`type`, `date`, `relevance` in 0..1 relative to the best
/// hit, `content`) plus `path`, `title`, `score`, `global`. `content` is the overview (L1)
/// unless `detail` is `full` (L2).
pub async fn search(
    projects: &Projects,
    project: Project,
    query: &str,
    scope: Scope,
    limit: usize,
    detail: Detail,
) -> Result<Value, Refusal> {
    let limit = limit.clamp(1, MAX_LIMIT);
    let mut searches = Vec::new();
    let known = match projects.open_read(&project).await {
        Ok(Some(open)) => {
            match search_store(&open, query, scope, limit, false).await {
                Ok(found) => searches.push(found),
                Err(e) => return Ok(unavailable(&project, e)),
            }
            true
        }
        Ok(None) => false,
        Err(e) => return e.answer(&project),
    };
    if let Ok(Some(global)) = projects.open_global(false).await {
        match search_store(&global, query, scope, limit, true).await {
            Ok(found) => searches.push(found),
            Err(e) => tracing::warn!(error = %e, "global memory unavailable for search"),
        }
    }
    // The weakest mode of the stores searched: listing < bm25 < hybrid.
    let rank_of = |m: &str| match m {
        "listing" => 0,
        "bm25" => 1,
        _ => 2,
    };
    let mode = searches
        .iter()
        .map(|f| f.mode)
        .min_by_key(|m| rank_of(m))
        .unwrap_or(if projects.has_embedder() {
            "hybrid"
        } else {
            "bm25"
        });
    let reasons: Vec<String> = searches.iter().filter_map(|f| f.reason.clone()).collect();
    let mut hits: Vec<Hit> = searches.into_iter().flat_map(|f| f.hits).collect();
    if mode == "listing" {
        hits.sort_by_key(|h| std::cmp::Reverse(h.header.mtime));
    } else {
        hits.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
    }
    hits.truncate(limit);
    // Each store once, and the hits' files read at once (not one after the other).
    let project_store = if hits.iter().any(|h| !h.global) {
        projects.open_read(&project).await.ok().flatten()
    } else {
        None
    };
    let global_store = if hits.iter().any(|h| h.global) {
        projects.open_global(false).await.ok().flatten()
    } else {
        None
    };
    // The hits' headers are the header caches': their texts as of that search's refresh, kept
    // read for the next search that finds them; each store's hits read at once.
    let mut files: Vec<Option<Arc<MemoryFile>>> = vec![None; hits.len()];
    for (global, store) in [(false, &project_store), (true, &global_store)] {
        let Some(open) = store else { continue };
        let at: Vec<usize> = (0..hits.len())
            .filter(|i| hits[*i].global == global)
            .collect();
        let headers: Vec<MemoryHeader> = at.iter().map(|i| hits[*i].header.clone()).collect();
        for (i, file) in at.into_iter().zip(open.headers.read_many(&headers).await) {
            files[i] = file.ok();
        }
    }
    let bodies: Vec<Value> = hits
        .iter()
        .zip(&files)
        .map(|(hit, file)| {
            let store = if hit.global {
                &global_store
            } else {
                &project_store
            };
            match store {
                Some(_) => header_with_file(&hit.header, file.as_deref(), detail),
                None => header_json(&hit.header),
            }
        })
        .collect();
    let mut results = Vec::new();
    for (hit, mut v) in hits.iter().zip(bodies) {
        if let Value::Object(map) = &mut v {
            map.insert("type".into(), json!(kind_of(&hit.header.rel_path)));
            map.insert("date".into(), json!(day_of(&hit.header.modified_rfc3339())));
            map.insert("score".into(), json!(hit.score));
            map.insert("relevance".into(), json!(hit.relevance));
            map.insert("global".into(), json!(hit.global));
            if hit.global {
                map.insert(
                    "path".into(),
                    json!(format!("{GLOBAL_PREFIX}{}", hit.header.rel_path)),
                );
            }
        }
        results.push(v);
    }
    let mut out = json!({
        "project_id": project.id,
        "project": project_json(&project),
        "available": true,
        "known": known,
        "mode": mode,
        "detail": detail_name(detail),
        "results": results,
    });
    if let (Value::Object(map), false) = (&mut out, reasons.is_empty()) {
        map.insert("degraded_reason".into(), Value::String(reasons.join("; ")));
    }
    Ok(out)
}

/// The global memories (titles and paths, marked global) for `context_load`.
async fn global_listing(projects: &Projects) -> Vec<Value> {
    let Ok(Some(global)) = projects.open_global(false).await else {
        return Vec::new();
    };
    // The global memory's header cache (newest first): O(cap), not a scan of the global dir.
    match global.headers.headers().await {
        Ok(headers) => headers
            .iter()
            .take(LOAD_LIST_CAP)
            .map(|h| {
                let mut v = header_json(&pages::bounded_header(h));
                v["path"] = json!(format!("{GLOBAL_PREFIX}{}", h.rel_path));
                v["global"] = json!(true);
                v
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "global memory unavailable");
            Vec::new()
        }
    }
}

/// How one store's search was ranked.
struct Ranked {
    /// Paths best first, with their BM25F scores (0 for a memory only the dense half found).
    scored: Vec<(String, f32)>,
    /// `hybrid` or `bm25`.
    mode: &'static str,
    /// Why the hybrid selector fell back to BM25, if it did.
    degraded: Option<String>,
}

/// Rank through the hybrid selector when there is one (the contract enforced by
/// `select_checked`; the BM25F scores of the chosen memories come along), else BM25 alone in
/// one pass: the index follows the store once and ranks only the memories in `scope`, scores
/// included (the caller keeps only the paths it listed in `headers`).
async fn ranked(
    open: &OpenProject,
    query: &str,
    headers: &[MemoryHeader],
    scope: Scope,
    limit: usize,
) -> Result<Ranked, String> {
    let Some(hybrid) = open.recall.hybrid() else {
        let scored = open
            .recall
            .bm25()
            .scored(query, headers, limit, |p| scope.contains(p))
            .await;
        return Ok(Ranked {
            scored,
            mode: "bm25",
            degraded: None,
        });
    };
    let events = Arc::new(memloop_core::events::VecSink::default());
    let mut ctx = memloop_recall::SelectionContext::with_limit(limit);
    ctx.events = events.clone();
    // Embed every memory without a vector first (no time budget: the first search of a large
    // store pays for it once; later ones only embed what changed). A failure here shows again
    // in the selection, which falls back to BM25.
    if let Err(e) = hybrid.warm(headers).await {
        tracing::warn!(error = %e, "embedding memories failed");
    }
    let selector: Arc<dyn Selector> = hybrid.clone();
    let chosen = selector
        .select_checked(query, headers, &ctx)
        .await
        .map_err(|e| {
            // The error may name the server's files (a vector cache): the log has it.
            tracing::warn!(error = %e, "search backend failed");
            "search backend failed (the server's log says why)".to_owned()
        })?;
    let degraded =
        events
            .events()
            .iter()
            .find_map(|e| match e.extension::<memloop_recall::RecallEvent>() {
                Some(memloop_recall::RecallEvent::RecallDegraded { reason, .. }) => {
                    Some(reason.clone())
                }
                _ => None,
            });
    let mode = if degraded.is_some() { "bm25" } else { "hybrid" };
    let scores = open
        .recall
        .bm25()
        .scored(query, headers, limit.max(chosen.len()) * 4, |p| {
            chosen.iter().any(|c| c == p)
        })
        .await;
    let scored = chosen
        .into_iter()
        .map(|p| {
            let s = scores
                .iter()
                .find(|(q, _)| *q == p)
                .map_or(0.0, |(_, s)| *s);
            (p, s)
        })
        .collect();
    Ok(Ranked {
        scored,
        mode,
        degraded,
    })
}

pub(crate) fn refusal_reason(e: &MemoryError) -> (&'static str, String) {
    let code = match e {
        MemoryError::SensitiveData { .. } => "secret_refused",
        // The text rule every store applies (`CheckedWrite`): a control character in a title
        // or description, a NUL in a body.
        MemoryError::InvalidName { reason, .. }
            if reason.contains("control character") || reason.contains("NUL character") =>
        {
            "invalid_text"
        }
        MemoryError::InvalidName { .. } | MemoryError::OutsideMemoryDir { .. } => "invalid_path",
        MemoryError::TooLarge { .. } => "too_large",
        MemoryError::VersionConflict { .. } => "version_conflict",
        _ => "write_failed",
    };
    (code, crate::disclosure::client_text(e))
}

/// Whether `e` refuses the request itself (a bad or escaping target, a credential, a size, a
/// missing memory) rather than reporting a failing backend.
pub(crate) fn is_refusal(e: &MemoryError) -> bool {
    matches!(
        e,
        MemoryError::InvalidName { .. }
            | MemoryError::OutsideMemoryDir { .. }
            | MemoryError::InvalidMemoryDir { .. }
            | MemoryError::SensitiveData { .. }
            | MemoryError::TooLarge { .. }
            | MemoryError::NotFound(_)
    )
}

/// A store error as the answer: a tool error with the reason when the request is refused
/// (`what` names the action, e.g. "update `todos/x.md`"), else `available: false`.
fn store_failure(project: &Project, what: &str, e: MemoryError) -> Result<Value, Refusal> {
    if let Some(r) = conflict_refusal(what, &e) {
        return Err(r);
    }
    match e {
        MemoryError::NotFound(_) => Err(Refusal::new(format!("{what}: no such memory"))),
        e if is_refusal(&e) => {
            tracing::info!(project = %project.path.display(), error = %e, "{what} refused");
            Err(Refusal::new(format!(
                "{what} refused: {}",
                crate::disclosure::client_text(&e)
            )))
        }
        e => Ok(unavailable(project, e)),
    }
}

/// What `context_manage` was asked (the tool's arguments, borrowed).
#[derive(Debug, Clone, Copy)]
pub struct ManageRequest<'a> {
    /// What to do.
    pub action: ManageAction,
    /// The memory's path (delete, update) or a path prefix (list).
    pub target: Option<&'a str>,
    /// The new body (update).
    pub content: Option<&'a str>,
    /// The version the client read (update: required).
    pub expected_version: Option<&'a str>,
    /// The previous page's `nextCursor` (list).
    pub cursor: Option<&'a str>,
}

/// One page of `context_manage list` ([`crate::pages`]): the memories of `scope` (the project's
/// id, or the global memory's prefix) whose path starts with `prefix`, by path, after the path
/// `cursor` names; `total`, how many memories the prefix has; and `nextCursor` when more
/// follow, with the page's items apart (escaped and redacted when made: [`Reply`]). The
/// items (their JSON, as they leave the server) take at most [`pages::PAGE_BYTES`] and half
/// of `max_answer_bytes`, so the page is never cut by the answer cap (which would leave out
/// items the cursor has passed).
fn list_page(
    headers: &Headers,
    kept: &pages::ListItems,
    scope: &str,
    prefix: &str,
    cursor: Option<&str>,
    max_answer_bytes: usize,
) -> Result<Reply, Refusal> {
    let after = match cursor.filter(|c| !c.trim().is_empty()) {
        Some(c) => match pages::decode_cursor(c, scope, prefix) {
            Some(after) => Some(after),
            None => {
                let mut r = Refusal::new(pages::INVALID_CURSOR);
                r.details.insert("code".into(), json!("invalid_cursor"));
                return Err(r);
            }
        },
        None => None,
    };
    // One more than a page holds: whether it is there says whether more follow.
    let (candidates, total) =
        pages::first_by_path(headers, prefix, after.as_deref(), pages::PAGE_ITEMS + 1);
    let budget = pages::PAGE_BYTES.min(max_answer_bytes / 2);
    let mut used = 0usize;
    let mut shown = Vec::new();
    let mut last: Option<&str> = None;
    let made = kept.items(
        candidates.iter().take(pages::PAGE_ITEMS).copied(),
        list_item,
    );
    for (h, item) in candidates.iter().zip(made) {
        // Always one item, so that every page moves the cursor on (a path alone is short).
        if used + item.size() > budget && !shown.is_empty() {
            break;
        }
        used += item.size();
        shown.push(item);
        last = Some(h.rel_path.as_str());
    }
    let more = shown.len() < candidates.len();
    let mut page = serde_json::Map::new();
    page.insert("total".into(), json!(total));
    if let (true, Some(last)) = (more, last) {
        page.insert(
            "nextCursor".into(),
            Value::String(pages::encode_cursor(scope, prefix, last)),
        );
    }
    // The items as they were filtered when made, apart: the answer takes them in as they are.
    let items = shown.iter().map(|i| i.item.clone()).collect();
    Ok(Reply::with_filtered(Value::Object(page), "memories", items))
}

/// A memory as a list page shows it ([`pages::ListItem`]): its title and description cut to
/// an item's bounds, as JSON, filtered for the answer.
fn list_item(h: &MemoryHeader) -> pages::ListItem {
    pages::ListItem {
        header: h.clone(),
        item: Arc::new(FilteredItem::new(header_json(&pages::bounded_header(h)))),
    }
}

/// `context_manage` (`claude_md`: whether `init_project` may write the usage block).
pub async fn manage(
    projects: &Projects,
    project: Project,
    request: ManageRequest<'_>,
    claude_md: bool,
) -> Result<Reply, Refusal> {
    let ManageRequest {
        action,
        target,
        content,
        expected_version,
        cursor,
    } = request;
    let create = action == ManageAction::InitProject;
    let existed = project.known();
    let global_target = global_target(target);
    let target = global_target.or(target);
    let opened = if global_target.is_some() && !create {
        projects.open_global(false).await.map_err(OpenFailed::Store)
    } else if action.effect() == Effect::Write {
        projects.open_write(&project, create).await
    } else {
        projects.open_read(&project).await
    };
    let open = match opened {
        Ok(Some(open)) => open,
        Ok(None) => {
            return Ok(json!({
                "project": project_json(&project), "available": true, "known": false,
                "action": action_name(action), "memories": [],
                "hint": "no memory yet: use action init_project or context_save",
            })
            .into());
        }
        Err(e) => return e.answer(&project).map(Reply::from),
    };
    let store = open.store.as_ref();
    let target_path = || -> Result<String, Refusal> {
        let t = target
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Refusal::new(format!("{} needs a target path", action_name(action))))?;
        validate_rel_path(t)
            .map(str::to_owned)
            .map_err(|e| Refusal::new(e.to_string()))
    };
    let base = |extra: Value| -> Value {
        let mut v = json!({
            "project": project_json(&project), "available": true, "known": true,
            "action": action_name(action), "global": global_target.is_some(),
        });
        if let (Value::Object(map), Value::Object(more)) = (&mut v, extra) {
            map.extend(more);
        }
        v
    };
    match action {
        ManageAction::List => match open.headers.headers().await {
            Ok(headers) => {
                let scope = if global_target.is_some() {
                    GLOBAL_PREFIX
                } else {
                    project.id.as_str()
                };
                let page = list_page(
                    &headers,
                    &open.list_items,
                    scope,
                    target.unwrap_or(""),
                    cursor,
                    projects.limits().max_answer_bytes,
                )?;
                Ok(page.map(base))
            }
            Err(e) => Ok(unavailable(&project, e).into()),
        },
        ManageAction::Delete => {
            let rel = target_path()?;
            match store.delete(&rel).await {
                Ok(()) => Ok(base(json!({ "deleted": rel })).into()),
                Err(e) => store_failure(&project, &format!("delete `{rel}`"), e).map(Reply::from),
            }
        }
        ManageAction::Update => {
            let rel = target_path()?;
            let content = content
                .filter(|c| !c.trim().is_empty())
                .ok_or_else(|| Refusal::new("update needs non-empty content"))?;
            let what = format!("update `{rel}`");
            let old = match store.read(&rel).await {
                Ok(f) => f,
                Err(e) => return store_failure(&project, &what, e).map(Reply::from),
            };
            let previous = content_version(&old.raw);
            // Given, the version the client read is checked; left out (as clients of the
            // original `target` + `content` schema do), the update applies to the version just
            // read, so a change made between this read and the write is still never overwritten.
            let expected = match expected_of(expected_version)? {
                ExpectedVersion::Any => ExpectedVersion::Is(previous.clone()),
                e => e,
            };
            if !expected.accepts(Some(&previous)) {
                return store_failure(&project, &what, expected.conflict(&rel, Some(&previous)))
                    .map(Reply::from);
            }
            let h = &old.header;
            let title = title_of(h);
            let mut description = first_line(content, 150);
            if description.is_empty() {
                description = title.clone();
            }
            let summariser = projects.summariser();
            let body = match summariser {
                Some(_) => tiers::with_pending(content),
                None => content.to_owned(),
            };
            let doc = MemoryDoc::new(title, description, h.memory_type, body);
            // The memory as its writer stored it, with its body replaced and its description
            // following it: frontmatter keys memloop does not know (`tags:`, a `metadata:`
            // block), comments, list formatting and key order stay as they were, on every store.
            match store
                .write_if(&rel, &doc, WriteMode::ReplaceBody, &expected)
                .await
            {
                Ok(w) => {
                    if let Some(s) = summariser {
                        s.enqueue(&open.store, &w.report.rel_path);
                    }
                    Ok(base(json!({
                        "updated": w.report.rel_path, "description": doc.description,
                        "version": w.version, "previous_version": previous,
                        "summary_state": if summariser.is_some() { "pending" } else { "none" },
                    }))
                    .into())
                }
                Err(e) => store_failure(&project, &what, e).map(Reply::from),
            }
        }
        ManageAction::InitProject => {
            let claude_md = if claude_md {
                match crate::onboarding::write_usage_block(&project.path) {
                    Ok(w) => json!(w.as_str()),
                    Err(e) => {
                        tracing::warn!(error = %e, "CLAUDE.md not written");
                        json!(format!("not written: {e}"))
                    }
                }
            } else {
                json!("skipped")
            };
            Ok(base(json!({
                "initialized": true,
                "created": !existed,
                "claude_md": claude_md,
                "note": "the memory dir exists; its index (MEMORY.md) is written with the first \
                         saved entry",
            }))
            .into())
        }
    }
}

fn detail_name(d: Detail) -> &'static str {
    match d {
        Detail::Summary => "summary",
        Detail::Full => "full",
    }
}

fn action_name(a: ManageAction) -> &'static str {
    match a {
        ManageAction::List => "list",
        ManageAction::Delete => "delete",
        ManageAction::Update => "update",
        ManageAction::InitProject => "init_project",
    }
}
