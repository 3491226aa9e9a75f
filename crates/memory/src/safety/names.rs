//! Validation of memory names: topic names typed by a model and relative paths given to stores.

use crate::types::MemoryError;

fn invalid(name: &str, reason: &str) -> MemoryError {
    MemoryError::InvalidName {
        name: name.replace('\0', "\\0"),
        reason: reason.to_owned(),
    }
}

/// Longest topic name accepted.
const MAX_TOPIC_CHARS: usize = 200;

/// Validate a topic name from a tool: non-empty, at most 200 characters, no
/// `..`, `/`, `\`, NUL or other control characters, no leading `.`.
///
/// ```
/// use memloop_memory::store::validate_topic;
/// assert!(validate_topic("testing_prefs").is_ok());
/// assert!(validate_topic("../etc/passwd").is_err());
/// assert!(validate_topic(".hidden").is_err());
/// ```
pub fn validate_topic(topic: &str) -> Result<&str, MemoryError> {
    let t = topic;
    if t.trim().is_empty() {
        return Err(invalid(t, "it is empty"));
    }
    if t.chars().count() > MAX_TOPIC_CHARS {
        return Err(invalid(t, "it is longer than 200 characters"));
    }
    if t.contains('\0') {
        return Err(invalid(t, "it contains a NUL character"));
    }
    if t.contains("..") {
        return Err(invalid(t, "it contains `..`"));
    }
    if t.contains('/') || t.contains('\\') {
        return Err(invalid(
            t,
            "it contains a path separator; use a plain name like `testing_prefs`",
        ));
    }
    if t.starts_with('.') {
        return Err(invalid(t, "it starts with `.`"));
    }
    if t.chars().any(char::is_control) {
        return Err(invalid(t, "it contains a control character"));
    }
    Ok(t)
}

/// The relative path of a topic: `<topic>.md` (a trailing `.md` is not doubled). `MEMORY` names
/// the index and is not a topic.
pub fn topic_to_rel_path(topic: &str) -> Result<String, MemoryError> {
    let t = validate_topic(topic)?;
    let stem = t.strip_suffix(".md").unwrap_or(t);
    if stem.is_empty() {
        return Err(invalid(t, "it is empty"));
    }
    if stem.eq_ignore_ascii_case("MEMORY") {
        return Err(invalid(t, "MEMORY is the index, not a topic"));
    }
    Ok(format!("{stem}.md"))
}

/// Validate a store-relative path (the `MemoryStore` contract): `/`-separated segments that
/// each pass the topic rules (so no `..`, `\`, NUL, leading `.` or empty segment), no leading
/// `/`, ending in `.md`, and not `MEMORY.md`.
pub fn validate_rel_path(rel: &str) -> Result<&str, MemoryError> {
    if rel.starts_with('/') {
        return Err(invalid(rel, "absolute paths are not allowed"));
    }
    for seg in rel.split('/') {
        validate_topic(seg).map_err(|e| match e {
            MemoryError::InvalidName { reason, .. } => {
                invalid(rel, &format!("segment `{seg}` is not allowed: {reason}"))
            }
            other => other,
        })?;
    }
    if !rel.ends_with(".md") {
        return Err(invalid(rel, "memory files must end in `.md`"));
    }
    if rel.rsplit('/').next() == Some("MEMORY.md") {
        return Err(invalid(rel, "MEMORY.md is the index, not a memory"));
    }
    Ok(rel)
}

/// What a memory read names: a topic (`feedback_testing`) or a store-relative path as the
/// memory list, the index and the daily logs show it (`team/grafana.md`,
/// `logs/2026/04/2026-04-09`); `.md` is added when missing.
pub(crate) fn read_target_to_rel_path(target: &str) -> Result<String, MemoryError> {
    if !target.contains('/') {
        return topic_to_rel_path(target);
    }
    let rel = if target.ends_with(".md") {
        target.to_owned()
    } else {
        format!("{target}.md")
    };
    validate_rel_path(&rel)?;
    Ok(rel)
}
