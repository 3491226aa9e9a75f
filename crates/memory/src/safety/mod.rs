//! Storage safety: the single write-containment gate, atomic writes,
//! the cross-process lock around index updates, name validation and the sensitive-data filter.

mod atomic;
mod containment;
mod lock;
mod names;
mod secrets;

pub use atomic::{TEMP_PREFIX, atomic_write, remove_temp_files};
pub(crate) use containment::warn_refused;
pub use containment::{ContainmentGate, normalize_lexically};
pub use lock::{DirLock, LOCK_FILE};
pub use names::{topic_to_rel_path, validate_rel_path, validate_topic};
pub use secrets::{SecretFilter, SecretPattern};
