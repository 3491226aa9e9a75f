//! Generic built-in tools: [`ReadFile`], [`Glob`], [`Grep`] (read-only), [`WriteFile`] and
//! [`EditFile`] (they name their targets through [`Tool::write_targets`](crate::tool::Tool::write_targets)
//! so a [`WriteScopeGate`](crate::tool::WriteScopeGate) can check them before the call) and [`Shell`]
//! (which classifies each command as read-only or not).
//!
//! Relative paths are resolved against [`ToolContext::cwd`](crate::tool::ToolContext::cwd).
//!
//! ```
//! use memloop_core::tools::{Glob, Grep, ReadFile};
//! use memloop_core::tool::ToolRegistry;
//! use std::sync::Arc;
//! let read_only = ToolRegistry::new()
//!     .with(Arc::new(ReadFile::default()))
//!     .with(Arc::new(Glob::default()))
//!     .with(Arc::new(Grep::default()));
//! assert_eq!(read_only.names(), ["glob", "grep", "read_file"]);
//! ```

mod edit;
mod glob;
mod read;
mod search;
mod shell;
mod walk;

pub use edit::{EditFile, WriteFile};
pub use glob::{GlobError, glob_to_regex};
pub use read::ReadFile;
pub use search::{Glob, Grep};
pub use shell::{Shell, classify_command};

use crate::tool::ToolContext;
use std::path::{Component, Path, PathBuf};

/// `path` made absolute against the tool context's working directory and lexically normalised
/// (`.` removed, `..` applied). Symlinks are not resolved here: containment gates do that.
///
/// ```
/// use memloop_core::tools::resolve_path;
/// use std::path::Path;
/// assert_eq!(resolve_path(Path::new("/work"), "a/../b.md"), Path::new("/work/b.md"));
/// assert_eq!(resolve_path(Path::new("/work"), "/etc/x"), Path::new("/etc/x"));
/// ```
pub fn resolve_path(cwd: &Path, path: &str) -> PathBuf {
    let joined = cwd.join(path);
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A required string field of a tool input.
pub(crate) fn str_field<'a>(input: &'a serde_json::Value, key: &str) -> Result<&'a str, String> {
    input
        .get(key)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("missing required string field `{key}`"))
}

/// An optional non-negative integer field.
pub(crate) fn usize_field(input: &serde_json::Value, key: &str) -> Result<Option<usize>, String> {
    match input.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| format!("`{key}` must be a non-negative integer")),
    }
}

/// The absolute path named by the `path` field.
pub(crate) fn target(input: &serde_json::Value, ctx: &ToolContext) -> Result<PathBuf, String> {
    let p = str_field(input, "path")?;
    if p.is_empty() {
        return Err("`path` is empty".into());
    }
    if p.contains('\0') {
        return Err("`path` contains a NUL byte".into());
    }
    Ok(resolve_path(&ctx.cwd, p))
}

#[cfg(test)]
pub(crate) fn test_ctx(cwd: &Path) -> ToolContext {
    ToolContext {
        session_id: "test".into(),
        cwd: cwd.to_path_buf(),
        agent: crate::tool::AgentKind::Main,
        cancel: Default::default(),
    }
}
