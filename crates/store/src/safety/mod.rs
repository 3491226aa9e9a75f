//! Storage safety: the single write-containment gate, atomic writes,
//! the cross-process lock around index updates and name validation (the sensitive-data filter is
//! the `memloop-secrets` crate).

mod atomic;
mod containment;
mod internal;
mod lock;
mod names;

pub(crate) use atomic::sync_parent_dir;
pub use atomic::{Durability, atomic_write, atomic_write_with, has_temp_files, remove_temp_files};
pub use containment::ContainmentGate;
pub use containment::{resolve_existing_prefix, warn_refused};
pub use internal::{internal_dir, open_internal_file, read_internal_file};
pub use lock::DirLock;
pub(crate) use names::shown;
pub use names::{
    printable, read_target_to_rel_path, title_file_stem, title_key, topic_to_rel_path,
    validate_rel_path, validate_topic,
};
