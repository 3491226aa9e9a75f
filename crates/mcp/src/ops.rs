//! The four tools' logic, independent of the MCP plumbing: each returns the JSON answer, or a
//! [`Refusal`] when the request itself is not acceptable (the project path, a target name).
//! A failing backend is not a refusal: the answer says `available: false` and why.

use crate::answer::McpLimits;
use crate::mapping::{EntryType, Scope, entry_to_memory, first_line};
use crate::projects::{OpenProject, Project, Projects};
use memloop_memory::recall::{Selector, format_manifest};
use memloop_memory::store::{
    MemoryDoc, MemoryError, MemoryHeader, MemoryStore, WriteMode, validate_rel_path,
};
use rmcp::schemars;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// How many session summaries `context_load` inlines.
const RECENT_SESSIONS: usize = 3;
/// How many todos and decisions `context_load` lists at most.
const LOAD_LIST_CAP: usize = 50;
/// Most entries one `context_save` call accepts by default ([`McpLimits::max_batch_entries`]).
pub const MAX_BATCH: usize = 100;
/// Most results one `context_search` returns.
pub const MAX_LIMIT: usize = 50;

/// The request cannot be served as asked (shown to the model as a tool error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl From<crate::projects::ProjectRefused> for Refusal {
    fn from(e: crate::projects::ProjectRefused) -> Self {
        Self(e.to_string())
    }
}

/// One entry of a `context_save` batch.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
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
}

/// What `context_manage` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ManageAction {
    /// List memories (optionally only those whose path starts with `target`, e.g. `todos/`).
    List,
    /// Delete the memory at `target` (a path as listed, e.g. `todos/fix-ci.md`).
    Delete,
    /// Replace the body of the memory at `target` with `content` (title and type kept).
    Update,
    /// Create the project's memory dir if it does not exist yet (its index, `MEMORY.md`, is
    /// written with the first saved entry).
    InitProject,
}

fn project_json(p: &Project) -> Value {
    json!({
        "id": p.id,
        "path": p.path,
        "memory_dir": p.memory.dir,
        "resolved_by": p.memory.rule.to_string(),
        "known": p.known(),
    })
}

fn unavailable(p: &Project, reason: impl std::fmt::Display) -> Value {
    tracing::warn!(project = %p.path.display(), %reason, "memory backend unavailable");
    json!({ "project": project_json(p), "available": false, "reason": reason.to_string() })
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

async fn with_body(store: &dyn MemoryStore, h: &MemoryHeader) -> Value {
    let mut v = header_json(h);
    if let (Value::Object(map), Ok(file)) = (&mut v, store.read(&h.rel_path).await) {
        map.insert("content".into(), Value::String(file.body));
    }
    v
}

/// `context_load`.
pub async fn load(projects: &Projects, project_path: &str) -> Result<Value, Refusal> {
    let project = projects.resolve(project_path).await?;
    let open = match projects.open(&project, false).await {
        Ok(Some(open)) => open,
        Ok(None) => {
            return Ok(json!({
                "project": project_json(&project),
                "available": true,
                "known": false,
                "hint": "no memory yet for this project: save entries with context_save (or \
                         context_manage init_project) to start one",
            }));
        }
        Err(e) => return Ok(unavailable(&project, e)),
    };
    let store = open.store.as_ref();
    let (headers, index) = match (store.scan().await, store.load_index().await) {
        (Ok(h), Ok(i)) => (h, i),
        (Err(e), _) | (_, Err(e)) => return Ok(unavailable(&project, e)),
    };
    let in_folder = |f: &'static str| {
        headers
            .iter()
            .filter(move |h| h.rel_path.starts_with(f))
            .take(LOAD_LIST_CAP)
    };
    let sessions: Vec<&MemoryHeader> = in_folder("sessions/").collect();
    let mut recent = Vec::new();
    for h in sessions.iter().take(RECENT_SESSIONS) {
        recent.push(with_body(store, h).await);
    }
    let mut todos = Vec::new();
    for h in in_folder("todos/") {
        todos.push(with_body(store, h).await);
    }
    Ok(json!({
        "project": project_json(&project),
        "available": true,
        "known": true,
        "memories": headers.len(),
        "last_session": sessions.first().map(|h| h.modified_rfc3339()),
        "index": {
            "content": index.content,
            "truncated": index.truncated_by_lines || index.truncated_by_bytes,
        },
        "recent_sessions": recent,
        "open_todos": todos,
        "active_decisions": in_folder("decisions/").map(header_json).collect::<Vec<_>>(),
    }))
}

/// A search hit: the memory and its score (none when listing).
type Hit<'a> = (&'a MemoryHeader, Option<f32>);

/// `context_search`: BM25F through the recall layer's selector; when that fails, the memories
/// in scope newest first (`mode: "listing"`).
pub async fn search(
    projects: &Projects,
    project_path: &str,
    query: &str,
    scope: Scope,
    limit: usize,
) -> Result<Value, Refusal> {
    let project = projects.resolve(project_path).await?;
    let limit = limit.clamp(1, MAX_LIMIT);
    let open = match projects.open(&project, false).await {
        Ok(Some(open)) => open,
        Ok(None) => {
            return Ok(json!({
                "project": project_json(&project), "available": true, "known": false,
                "mode": "bm25", "results": [],
            }));
        }
        Err(e) => return Ok(unavailable(&project, e)),
    };
    let headers = match open.store.scan().await {
        Ok(h) => h,
        Err(e) => return Ok(unavailable(&project, e)),
    };
    let in_scope: Vec<MemoryHeader> = headers
        .into_iter()
        .filter(|h| scope.contains(&h.rel_path))
        .collect();
    let ranked = ranked(&open, query, &in_scope, limit).await;
    let (mode, reason, hits): (&str, Option<String>, Vec<Hit<'_>>) = match ranked {
        Ok(scored) => (
            "bm25",
            None,
            scored
                .iter()
                .filter_map(|(p, s)| {
                    in_scope
                        .iter()
                        .find(|h| &h.rel_path == p)
                        .map(|h| (h, Some(*s)))
                })
                .collect(),
        ),
        Err(e) => (
            "listing",
            Some(e),
            in_scope.iter().take(limit).map(|h| (h, None)).collect(),
        ),
    };
    let mut results = Vec::new();
    for (h, score) in hits {
        let mut v = with_body(open.store.as_ref(), h).await;
        if let Value::Object(map) = &mut v {
            map.insert("score".into(), json!(score));
        }
        results.push(v);
    }
    let mut out = json!({
        "project": project_json(&project),
        "available": true,
        "known": true,
        "mode": mode,
        "results": results,
    });
    if let (Value::Object(map), Some(reason)) = (&mut out, reason) {
        map.insert("degraded_reason".into(), Value::String(reason));
    }
    Ok(out)
}

/// Rank through the selector (contract enforced by `select_checked`), with BM25F scores.
async fn ranked(
    open: &OpenProject,
    query: &str,
    headers: &[MemoryHeader],
    limit: usize,
) -> Result<Vec<(String, f32)>, String> {
    let selector: Arc<dyn Selector> = open.selector.clone();
    let ctx = memloop_memory::recall::SelectionContext::with_limit(limit);
    let chosen = selector
        .select_checked(query, headers, &ctx)
        .await
        .map_err(|e| format!("search backend failed: {e}"))?;
    let scores = open
        .selector
        .scored(query, headers, limit, |p| chosen.iter().any(|c| c == p))
        .await;
    Ok(chosen
        .into_iter()
        .map(|p| {
            let s = scores
                .iter()
                .find(|(q, _)| *q == p)
                .map_or(0.0, |(_, s)| *s);
            (p, s)
        })
        .collect())
}

fn refusal_reason(e: &MemoryError) -> (&'static str, String) {
    let code = match e {
        MemoryError::SensitiveData { .. } => "secret_refused",
        MemoryError::InvalidName { .. } | MemoryError::OutsideMemoryDir { .. } => "invalid_path",
        MemoryError::TooLarge { .. } => "too_large",
        _ => "write_failed",
    };
    (code, e.to_string())
}

/// Whether `e` refuses the request itself (a bad or escaping target, a credential, a size, a
/// missing memory) rather than reporting a failing backend.
fn is_refusal(e: &MemoryError) -> bool {
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
    match e {
        MemoryError::NotFound(_) => Err(Refusal(format!("{what}: no such memory"))),
        e if is_refusal(&e) => Err(Refusal(format!("{what} refused: {e}"))),
        e => Ok(unavailable(project, e)),
    }
}

/// `context_save`: each entry written through the store; per entry what was written or why not.
pub async fn save(
    projects: &Projects,
    project_path: &str,
    entries: &[SaveEntry],
    limits: McpLimits,
) -> Result<Value, Refusal> {
    let project = projects.resolve(project_path).await?;
    if entries.is_empty() {
        return Err(Refusal("entries is empty: nothing to save".into()));
    }
    if entries.len() > limits.max_batch_entries {
        return Err(Refusal(format!(
            "{} entries in one batch; at most {}",
            entries.len(),
            limits.max_batch_entries
        )));
    }
    let total: usize = entries.iter().map(|e| e.content.len()).sum();
    if total > limits.max_batch_bytes {
        return Err(Refusal(format!(
            "the batch's contents are {total} bytes; at most {} in one call (split it)",
            limits.max_batch_bytes
        )));
    }
    let open = match projects.open(&project, true).await {
        Ok(Some(open)) => open,
        Ok(None) => return Ok(unavailable(&project, "memory dir could not be created")),
        Err(e) => return Ok(unavailable(&project, e)),
    };
    let now = chrono::Utc::now();
    let mut results = Vec::new();
    let (mut written, mut refused) = (0usize, 0usize);
    for (i, entry) in entries.iter().enumerate() {
        let (rel, doc) = entry_to_memory(
            entry.kind,
            entry.title.as_deref(),
            &entry.content,
            &entry.tags,
            now,
        );
        let r = if entry.content.trim().is_empty() {
            Err(("empty_content", "content is empty".to_owned()))
        } else if entry.content.len() > limits.max_entry_bytes {
            Err((
                "too_large",
                format!(
                    "content is {} bytes; at most {} per entry (split it or summarise)",
                    entry.content.len(),
                    limits.max_entry_bytes
                ),
            ))
        } else {
            open.store
                .write(&rel, &doc, WriteMode::Overwrite)
                .await
                .map_err(|e| refusal_reason(&e))
        };
        match r {
            Ok(report) => {
                written += 1;
                results.push(json!({
                    "index": i, "type": entry.kind.as_str(), "status": "written",
                    "path": report.rel_path, "created": report.created,
                    "memory_type": doc.memory_type.map(|t| t.as_str()),
                }));
            }
            Err((code, reason)) => {
                refused += 1;
                tracing::info!(entry = i, code, "context_save entry refused");
                results.push(json!({
                    "index": i, "type": entry.kind.as_str(), "status": "refused",
                    "code": code, "reason": reason,
                }));
            }
        }
    }
    Ok(json!({
        "project": project_json(&project),
        "available": true,
        "written": written,
        "refused": refused,
        "results": results,
    }))
}

/// `context_manage`.
pub async fn manage(
    projects: &Projects,
    project_path: &str,
    action: ManageAction,
    target: Option<&str>,
    content: Option<&str>,
    limits: McpLimits,
) -> Result<Value, Refusal> {
    let project = projects.resolve(project_path).await?;
    let create = action == ManageAction::InitProject;
    let existed = project.known();
    let open = match projects.open(&project, create).await {
        Ok(Some(open)) => open,
        Ok(None) => {
            return Ok(json!({
                "project": project_json(&project), "available": true, "known": false,
                "action": action_name(action), "memories": [],
                "hint": "no memory yet: use action init_project or context_save",
            }));
        }
        Err(e) => return Ok(unavailable(&project, e)),
    };
    let store = open.store.as_ref();
    let target_path = || -> Result<String, Refusal> {
        let t = target
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Refusal(format!("{} needs a target path", action_name(action))))?;
        validate_rel_path(t)
            .map(str::to_owned)
            .map_err(|e| Refusal(e.to_string()))
    };
    let base = |extra: Value| -> Value {
        let mut v = json!({
            "project": project_json(&project), "available": true, "known": true,
            "action": action_name(action),
        });
        if let (Value::Object(map), Value::Object(more)) = (&mut v, extra) {
            map.extend(more);
        }
        v
    };
    match action {
        ManageAction::List => match store.scan().await {
            Ok(headers) => {
                let prefix = target.unwrap_or("");
                let shown: Vec<MemoryHeader> = headers
                    .into_iter()
                    .filter(|h| h.rel_path.starts_with(prefix))
                    .collect();
                Ok(base(json!({
                    "memories": shown.iter().map(header_json).collect::<Vec<_>>(),
                    "manifest": format_manifest(&shown),
                })))
            }
            Err(e) => Ok(unavailable(&project, e)),
        },
        ManageAction::Delete => {
            let rel = target_path()?;
            match store.delete(&rel).await {
                Ok(()) => Ok(base(json!({ "deleted": rel }))),
                Err(e) => store_failure(&project, &format!("delete `{rel}`"), e),
            }
        }
        ManageAction::Update => {
            let rel = target_path()?;
            let content = content
                .filter(|c| !c.trim().is_empty())
                .ok_or_else(|| Refusal("update needs non-empty content".into()))?;
            if content.len() > limits.max_entry_bytes {
                return Err(Refusal(format!(
                    "update `{rel}` refused: content is {} bytes; at most {} per entry",
                    content.len(),
                    limits.max_entry_bytes
                )));
            }
            let what = format!("update `{rel}`");
            let old = match store.read(&rel).await {
                Ok(f) => f,
                Err(e) => return store_failure(&project, &what, e),
            };
            let h = &old.header;
            let title = title_of(h);
            let mut description = first_line(content, 150);
            if description.is_empty() {
                description = title.clone();
            }
            let doc = MemoryDoc::new(title, description, h.memory_type, content);
            match store.write(&rel, &doc, WriteMode::Overwrite).await {
                Ok(report) => Ok(base(
                    json!({ "updated": report.rel_path, "description": doc.description }),
                )),
                Err(e) => store_failure(&project, &what, e),
            }
        }
        ManageAction::InitProject => Ok(base(json!({
            "initialized": true,
            "created": !existed,
            "memory_dir": project.memory.dir,
            "note": "the memory dir exists; its index (MEMORY.md) is written with the first \
                     saved entry",
        }))),
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
