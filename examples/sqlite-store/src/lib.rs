//! # memloop-sqlite-store
//!
//! A memloop [`MemoryStore`](memloop::MemoryStore) on SQLite ([`SqliteMemoryStore`]): one
//! database file holds a project's memories, their index and a change feed. It is built outside
//! the memloop workspace, the way your own backend would be, and passes memloop's store
//! conformance suite (`tests/conformance.rs`). Copy it as the start of a backend of your own.
//!
//! It also implements the other three traits a host can give
//! [`MemorySetup`](memloop::MemorySetup) (module [`parts`]): a recall
//! [`Selector`](memloop::Selector) ([`KeywordSelector`]), an
//! [`Extractor`](memloop::Extractor) ([`FactExtractor`]) and a
//! [`SessionMemory`](memloop::SessionMemory) keeping session notes in the same database
//! ([`SqliteSessionNotes`]). `tests/three_sessions.rs` runs an agent over all four for three
//! sessions: a fact saved in the first is recalled in the second, and the third, long, is
//! compacted with its notes.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop::MemoryStore;
//! use memloop::memory::store::{MemoryDoc, MemoryType, WriteMode};
//! use memloop_sqlite_store::SqliteMemoryStore;
//!
//! let dir = tempfile::tempdir()?;
//! let store = SqliteMemoryStore::open(dir.path().join("memory.sqlite3"))?;
//! let store: &dyn MemoryStore = &store;
//! let doc = MemoryDoc::new("Deploy days", "when we deploy", MemoryType::Project, "Tuesdays only.");
//! store.write("deploy.md", &doc, WriteMode::Overwrite).await?;
//! assert_eq!(store.read("deploy.md").await?.body.trim_end(), "Tuesdays only.");
//! assert!(store.load_index().await?.content.contains("(deploy.md)"));
//! # Ok(()) }
//! ```

pub mod parts;
mod store;

pub use parts::{FactExtractor, KeywordSelector, SqliteSessionNotes};
pub use store::SqliteMemoryStore;
