//! # memloop-store
//!
//! The memory dir and every way to store memories: the [`MemoryStore`] trait every backend
//! implements, the embedded [`FileMemoryStore`] (Markdown topic files with YAML frontmatter and a
//! `MEMORY.md` index, Claude Code's on-disk format), the change feed hosts follow, and the rules
//! every write obeys whichever backend stores it ([`CheckedWrite`]: containment, names, size,
//! secrets by the `memloop-secrets` filter, scope and type, the index line). Where a project's
//! memory dir lives is decided here too ([`MemoryDirResolver`], [`canonical_project_root`], the
//! per-agent scopes).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop_store::{FileMemoryStore, MemoryDoc, MemoryStore, MemoryType, WriteMode};
//! let dir = tempfile::tempdir()?;
//! let store = FileMemoryStore::open(dir.path())?;
//! let doc = MemoryDoc::new("Deploy days", "when we deploy", MemoryType::Project, "Tuesdays only.");
//! store.write("project_deploy.md", &doc, WriteMode::Overwrite).await?;
//! assert_eq!(store.scan().await?.len(), 1);
//! assert!(store.load_index().await?.content.contains("project_deploy.md"));
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod env;

mod changes;
mod file_feed;
mod file_store;
mod frontmatter;
pub mod heap;
mod index;
mod index_file;
mod manifest;
mod memory_path;
mod memory_store;
mod project;
mod resolver;
mod safety;
mod scan;
mod scan_cache;
mod scopes;
mod stamp;
mod team;
mod types;

pub use changes::{ChangeCursor, Changes};
pub use file_store::{BATCH_JOURNAL, FileMemoryStore, REJECTED_BATCH_JOURNAL, StoreConfig};
pub use frontmatter::{append_to_existing, canonical_memory_text, replace_body};
pub use index::{INDEX_FILE, IndexCaps, format_entry_line, load_capped};
pub use manifest::{format_manifest, format_manifest_capped, format_mtime};
pub use memory_path::{LOGS_DIR, file_stem, is_daily_log};
pub use memory_store::{
    CheckedWrite, ExpectedVersion, LocalBases, LocalDir, LocalPurpose, MemoryPath, MemoryStore,
    StoreDescription, StoreLocation, VersionedWrite, WriteLimits, content_version,
};
pub use project::{canonical_project_root, origin_without_credentials, project_dir, project_slug};
pub use resolver::{ConfigFlavor, MemoryDirResolver, ResolutionRule, ResolvedMemoryDir};
pub use safety::{
    ContainmentGate, Durability, atomic_write, atomic_write_with, internal_dir, open_internal_file,
    printable, read_internal_file, read_target_to_rel_path, resolve_existing_prefix,
    title_file_stem, title_key, topic_to_rel_path, validate_rel_path, validate_topic, warn_refused,
};
pub use scan::ScanConfig;
pub use scan_cache::{Followed, Headers, ScanCache, ScanChange, ScanUpdate, Since};
pub use scopes::{
    AgentMemoryDir, AgentMemoryScope, AgentMemoryScopes, ScopeError, sanitize_agent_type,
};
pub use team::{MemoryScope, TEAM_DIR};
pub use types::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryType,
    WriteMode, WriteReport,
};
