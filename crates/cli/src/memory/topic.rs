//! What a TOPIC argument names, and the JSON shape of a memory header, shared by the
//! `memory` subcommands.

use memloop_store::{MemoryError, MemoryHeader, read_target_to_rel_path};
use serde_json::{Value, json};

/// What a TOPIC argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topic {
    /// `MEMORY` / `MEMORY.md`: the index.
    Index,
    /// A memory file, relative to the memory dir.
    File(String),
}

/// Parse a TOPIC argument: `MEMORY` (any case, optional `.md`) is the index; anything else
/// names a memory file by the store's one rule for what a read names
/// ([`read_target_to_rel_path`]: a name with a `/` is a relative path, `.md` added when
/// missing; a plain name is a topic, `testing` → `testing.md`). Hostile names (`../x`, `.hidden`, NUL) are
/// refused with [`MemoryError::InvalidName`].
///
/// ```
/// use memloop_cli::memory::{parse_topic, Topic};
/// assert_eq!(parse_topic("MEMORY").unwrap(), Topic::Index);
/// assert_eq!(parse_topic("testing").unwrap(), Topic::File("testing.md".into()));
/// assert_eq!(parse_topic("team/db.md").unwrap(), Topic::File("team/db.md".into()));
/// assert!(parse_topic("../x").is_err());
/// ```
pub fn parse_topic(topic: &str) -> Result<Topic, MemoryError> {
    let stem = topic.strip_suffix(".md").unwrap_or(topic);
    if stem.eq_ignore_ascii_case("MEMORY") {
        return Ok(Topic::Index);
    }
    read_target_to_rel_path(topic).map(Topic::File)
}

/// A memory file topic (the index is refused with a clear message).
pub(super) fn file_topic(topic: &str, what: &str) -> Result<String, MemoryError> {
    match parse_topic(topic)? {
        Topic::File(rel) => Ok(rel),
        Topic::Index => Err(MemoryError::InvalidName {
            name: topic.to_owned(),
            reason: format!(
                "MEMORY is the index; it cannot be {what} directly (the store keeps it in sync)"
            ),
        }),
    }
}

/// A header as JSON: `path`, `name`, `description`, `type`, `mtime`.
pub(super) fn header_json(h: &MemoryHeader) -> Value {
    json!({
        "path": h.rel_path,
        "name": h.name,
        "description": h.description,
        "type": h.memory_type.map(|t| t.as_str()),
        "mtime": h.modified_rfc3339(),
    })
}
