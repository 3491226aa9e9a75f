//! The change feed: how a store tells a cache what changed since it last looked, so per-turn
//! work (the recall hook's scan, the BM25 and vector sync, MCP search) costs O(changes) instead
//! of a rescan of every memory.
//!
//! The contract, for every backend:
//! - [`MemoryStore::changes`](crate::MemoryStore::changes) with `None` answers
//!   [`Changes::Rescan`] with a cursor taken *before* the caller's rescan reads anything, so a
//!   change made during that rescan is reported again by the next call (applying a change twice
//!   is harmless: a cache replaces the header it already has);
//! - with a cursor it answers [`Changes::Unchanged`], [`Changes::Changed`] with every memory
//!   written or removed since that cursor (by this process or any other writer: an editor, `git
//!   checkout`, a second process, a teammate), or [`Changes::Rescan`] whenever it cannot be sure
//!   (no feed, a lost watcher, a cursor from another store or too old). Never a wrong "unchanged".
//! - A backend without a feed keeps the default, which always answers `Rescan { cursor: None }`:
//!   correct, and as slow as before.

use crate::memory_path::MemoryPath;
use crate::types::{MemoryFile, MemoryHeader};

/// An opaque position in a store's change feed. Only the store that issued a cursor can
/// interpret it; a store handed a cursor it does not recognise answers [`Changes::Rescan`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChangeCursor(String);

impl ChangeCursor {
    /// A cursor from a backend's own encoding of its position (a generation number, a database
    /// sequence value, ...).
    pub fn new(position: impl Into<String>) -> Self {
        Self(position.into())
    }

    /// The backend's encoding, as given to [`ChangeCursor::new`].
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What changed in a store since a [`ChangeCursor`].
#[derive(Debug, Clone, PartialEq)]
pub enum Changes {
    /// Nothing changed since the cursor; keep it.
    Unchanged,
    /// These memories changed since the cursor; `cursor` marks the position after them.
    Changed {
        /// The position after these changes: pass it to the next call.
        cursor: ChangeCursor,
        /// Memories created or rewritten, with their current headers.
        written: Vec<MemoryHeader>,
        /// Memories deleted (or renamed away from these paths).
        removed: Vec<MemoryPath>,
        /// The text of some of the `written` memories (any of them, possibly none), as a read
        /// would return it now, read in the same answer: a consumer takes these instead of
        /// reading the memories again. Each one's header is its entry in `written`.
        files: Vec<MemoryFile>,
    },
    /// The store cannot say what changed: rescan everything. `cursor`, when given, was taken
    /// before the rescan should start; pass it to the next call.
    Rescan {
        /// The position to ask from after the rescan, if the store has a feed.
        cursor: Option<ChangeCursor>,
    },
}
