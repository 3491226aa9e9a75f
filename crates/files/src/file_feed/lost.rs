//! Why a watch queue cannot say what changed (shared by the queues and the feed).

/// Why the watcher cannot say what changed.
pub(super) enum Lost {
    /// It saw something it cannot describe path by path (overflow, a directory event).
    Rescan,
    /// It failed; poll instead.
    Broken(String),
}
