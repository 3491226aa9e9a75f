//! # memloop-tools
//!
//! Generic built-in tools: [`ReadFile`], [`Glob`], [`Grep`] (read-only), [`WriteFile`] and
//! [`EditFile`] (they name their targets through [`Tool::write_targets`](memloop_core::tool::Tool::write_targets)
//! so a [`WriteScopeGate`](memloop_core::tool::WriteScopeGate) can check them before the call) and [`Shell`]
//! (which classifies each command as read-only or not).
//!
//! Relative paths are resolved against [`ToolContext::cwd`](memloop_core::tool::ToolContext::cwd).
//!
//! ```
//! use memloop_tools::{Glob, Grep, ReadFile};
//! use memloop_core::tool::ToolRegistry;
//! use std::sync::Arc;
//! let read_only = ToolRegistry::new()
//!     .with(Arc::new(ReadFile::default()))
//!     .with(Arc::new(Glob::default()))
//!     .with(Arc::new(Grep::default()));
//! assert_eq!(read_only.names(), ["glob", "grep", "read_file"]);
//! ```

mod edit;
mod input;
mod read;
mod search;
mod shell;
mod walk;

pub use edit::{EditFile, WriteFile};
pub use read::ReadFile;
pub use search::{Glob, Grep};
pub use shell::{Shell, classify_command};
