//! # memloop-pg
//!
//! Team memory on PostgreSQL: what one engineer's agent learned about a repository reaches every
//! teammate's agent and every CI agent. The local memory dir
//! ([`FileMemoryStore`](memloop_files::FileMemoryStore)) stays the offline default; this
//! crate adds
//!
//! - [`PgMemoryStore`], a [`MemoryStore`](memloop_store::MemoryStore) with one row per
//!   memory keyed by (project id, relative path), versions for optimistic concurrency
//!   ([`PgMemoryStore::write_versioned`], [`PgError::Conflict`]) and embedded migrations run on
//!   open;
//! - `PgFtsSelector` (feature `agent`), a recall `Selector` over the database's full-text
//!   search;
//! - [`TeamSync`], push / pull / status between a local memory dir and the team store (per-entry
//!   SHA-256, server wins on pull, conflicts kept in a recovery file, deletions only with
//!   `prune`), and `TeamPullHook` (feature `agent`) to pull at session start.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
//! use memloop_pg::{Expected, PgConfig, PgMemoryStore};
//! let store = PgMemoryStore::open(PgConfig::new("postgres://127.0.0.1/team", "github.com/acme/api")).await?;
//! let doc = MemoryDoc::new("Deploys", "when we deploy", MemoryType::Project, "Tuesdays only.");
//! let w = store.write_versioned("project_deploy.md", &doc, WriteMode::Overwrite, Expected::Absent).await?;
//! assert_eq!(w.version, 1);
//! # Ok(()) }
//! ```

mod batch;
mod changes;
mod config;
mod content;
mod error;
#[cfg(feature = "agent")]
mod hook;
mod migrations;
#[cfg(test)]
mod plans;
mod search;
#[cfg(feature = "agent")]
mod selector;
mod statement;
mod store;
mod sync;
mod tls;

pub use batch::{BatchOutcome, BatchWrite, IDEMPOTENCY_TTL, IdempotencyKey};
pub use config::{
    DATABASE_URL_ENV, MAX_PROJECT_ID_CHARS, PgConfig, ProjectIdentity, legacy_project_id_for,
    project_id_for, validate_project_id,
};
pub use content::{canonical_text, sha256_hex};
pub use error::{PgError, StoreError, VersionLabel};
#[cfg(feature = "agent")]
pub use hook::TeamPullHook;
#[cfg(feature = "agent")]
pub use selector::PgFtsSelector;
pub use store::{Expected, PgMemory, PgMemoryStore, PgPool, PgWrite, PoolStatus};
pub use sync::{
    CONFLICT_DIR, EntryState, STATE_FILE, SyncAction, SyncItem, SyncOptions, SyncProgress,
    SyncReport, TeamSync,
};
pub use tls::SslMode;
