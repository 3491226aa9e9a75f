//! # memloop-store
//!
//! The contract every memory backend keeps: the [`MemoryStore`] trait (its rules stated on it),
//! the types it speaks ([`MemoryDoc`], [`MemoryHeader`], [`MemoryError`], the change feed's
//! [`Changes`]), the rules every write obeys whichever backend stores it ([`CheckedWrite`]:
//! names, size, secrets by the `memloop-secrets` filter, scope and type), Claude Code's text
//! formats (a memory file's frontmatter, the `MEMORY.md` index lines and their caps), and, behind
//! the feature `conformance`, the suite a backend runs from its own tests. A backend depends on
//! this crate alone: no file watching, no file locking. The embedded memory dir is one backend
//! among others (`memloop-files`); where a project's memory lives is `memloop-paths`'.
//!
//! ```
//! use memloop_store::{CheckedWrite, MemoryDoc, MemoryError, MemoryType, WriteLimits, WriteMode};
//! let doc = MemoryDoc::new("Deploy days", "when we deploy", MemoryType::Project, "Tuesdays only.");
//! // The rules run before any backend sees a write.
//! assert!(CheckedWrite::check("project_deploy.md", &doc, WriteMode::Overwrite, WriteLimits::default()).is_ok());
//! let index = CheckedWrite::check("MEMORY.md", &doc, WriteMode::Overwrite, WriteLimits::default());
//! assert!(matches!(index, Err(MemoryError::InvalidName { .. })));
//! ```
#![warn(missing_docs)]

#[cfg(feature = "conformance")]
pub mod conformance;

mod changes;
mod frontmatter;
pub mod heap;
mod index;
mod manifest;
mod memory_path;
mod memory_store;
mod names;
mod newest_first;
mod path_view;
mod scan_cache;
mod team;
mod types;

pub use changes::{ChangeCursor, Changes};
pub use frontmatter::{
    ParsedMemory, append_to_existing, canonical_memory_text, parse_memory, render_memory,
    replace_body,
};
pub use index::{
    INDEX_FILE, IndexCaps, IndexRest, format_entry_line, load_capped, load_capped_start,
    parse_entries, parse_entry_line, remove_entry, upsert_entry,
};
pub use manifest::{format_manifest, format_manifest_capped, format_mtime};
pub use memory_path::{LOGS_DIR, file_stem, is_daily_log};
pub use memory_store::{
    CheckedWrite, ExpectedVersion, LocalBases, LocalDir, LocalPurpose, MemoryPath, MemoryStore,
    StoreDescription, StoreLocation, VersionedWrite, WriteLimits, content_version,
};
pub use names::{
    printable, read_target_to_rel_path, shown_name, title_file_stem, title_key, topic_to_rel_path,
    validate_rel_path, validate_topic,
};
pub use scan_cache::{Followed, Headers, ScanCache, ScanChange, ScanUpdate, Since, folder_of};
pub use team::{MemoryScope, TEAM_DIR, TEAM_INDEX_FILE, team_relative};
pub use types::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryType,
    WriteMode, WriteReport,
};
