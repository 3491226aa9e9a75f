//! # memloop-host
//!
//! What memloop reads from the machine it runs on, decided in one place and depending on no other
//! memloop crate, so the storage crates can use it without the agent loop:
//!
//! | module | what it holds |
//! |---|---|
//! | [`env`](mod@env) | [`EnvVars`](env::EnvVars), the injectable environment snapshot every switch is read from |
//! | [`files`] | opening a path only when it is a regular file (a named pipe or a device in its place is an error, not a read that never returns) |
//! | [`paths`] | lexical path normalisation and resolution against a working directory |
//!
//! ```
//! use memloop_host::env::EnvVars;
//! use memloop_host::paths::normalize_lexically;
//! use std::path::Path;
//!
//! let env = EnvVars::from_pairs([("MEMLOOP_SIMPLE", "1")]);
//! assert!(env.switch("MEMLOOP_SIMPLE"));
//! assert_eq!(normalize_lexically(Path::new("/a/./b/../c")), Path::new("/a/c"));
//! ```
#![warn(missing_docs)]

pub mod env;
pub mod files;
pub mod paths;
