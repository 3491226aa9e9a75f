//! The memory store: the [`MemoryStore`] trait every backend implements, the embedded
//! [`FileMemoryStore`], the vocabulary of memories, and the rules every write obeys whichever
//! backend stores it (name validation, the secret filter, the index caps).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop_memory::store::{FileMemoryStore, MemoryDoc, MemoryStore, MemoryType, WriteMode};
//! let dir = tempfile::tempdir()?;
//! let store = FileMemoryStore::open(dir.path())?;
//! let doc = MemoryDoc::new("Deploy days", "when we deploy", MemoryType::Project, "Tuesdays only.");
//! store.write("project_deploy.md", &doc, WriteMode::Overwrite).await?;
//! assert_eq!(store.scan().await?.len(), 1);
//! assert!(store.load_index().await?.content.contains("project_deploy.md"));
//! # Ok(()) }
//! ```

pub use crate::changes::{ChangeCursor, Changes};
pub use crate::file_store::{FileMemoryStore, StoreConfig};
pub use crate::frontmatter::{append_to_existing, canonical_memory_text};
pub use crate::index::{INDEX_FILE, IndexCaps, format_entry_line, load_capped};
pub use crate::memory_store::{
    CheckedWrite, ExpectedVersion, LocalBases, LocalDir, LocalPurpose, MemoryPath, MemoryStore,
    StoreDescription, StoreLocation, VersionedWrite, WriteLimits, content_version,
};
pub use crate::safety::{
    ContainmentGate, SecretFilter, redact_secrets, title_file_stem, title_key, topic_to_rel_path,
    validate_rel_path,
};
pub use crate::scan::ScanConfig;
pub use crate::scan_cache::{Headers, ScanCache, ScanChange, ScanUpdate};
pub use crate::team::{MemoryScope, TEAM_DIR};
pub use crate::types::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryType,
    WriteMode, WriteReport,
};
