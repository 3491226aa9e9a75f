//! # memloop-files
//!
//! The memory dir: memloop's embedded default [`MemoryStore`](memloop_store::MemoryStore), a
//! directory of Markdown topic files with YAML frontmatter and a `MEMORY.md` index, in Claude
//! Code's on-disk format ([`FileMemoryStore`]). Writes are atomic, confined to the dir and
//! locked across processes; a batch is journaled so it lands whole through a crash; the change
//! feed follows the dir through the platform's file watching (one inotify instance per process
//! on Linux). memloop's own files in the dir are opened without following links.
//!
//! One backend among others: the contract it keeps is `memloop-store`'s, and where a project's
//! memory dir lives is `memloop-paths`'.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop_files::FileMemoryStore;
//! use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
//! let dir = tempfile::tempdir()?;
//! let store = FileMemoryStore::open(dir.path())?;
//! let doc = MemoryDoc::new("Deploy days", "when we deploy", MemoryType::Project, "Tuesdays only.");
//! store.write("project_deploy.md", &doc, WriteMode::Overwrite).await?;
//! assert_eq!(store.scan().await?.len(), 1);
//! assert!(store.load_index().await?.content.contains("project_deploy.md"));
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod file_feed;
mod file_store;
mod index_file;
mod safety;
mod scan;
mod stamp;

pub use file_store::{BATCH_JOURNAL, FileMemoryStore, REJECTED_BATCH_JOURNAL, StoreConfig};
pub use safety::{
    ContainmentGate, Durability, atomic_write, atomic_write_with, existing_internal_dir,
    internal_dir, open_internal_file, read_internal_file, resolve_existing_prefix, warn_refused,
};
pub use scan::ScanConfig;
