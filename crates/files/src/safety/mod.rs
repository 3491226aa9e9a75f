//! Storage safety of the memory dir: the single write-containment gate, atomic writes, the
//! cross-process lock around index updates, and memloop's own files opened without following
//! links (the name rules every backend shares are `memloop-store`'s).

mod atomic;
mod containment;
mod durable;
mod internal;
mod lock;

pub(crate) use atomic::sync_parent_dir;
pub use atomic::{Durability, atomic_write, atomic_write_with, has_temp_files, remove_temp_files};
pub use containment::ContainmentGate;
pub use containment::{resolve_existing_prefix, warn_refused};
pub(crate) use durable::make_durable;
pub use internal::{existing_internal_dir, internal_dir, open_internal_file, read_internal_file};
pub use lock::DirLock;
