//! Lexical path handling shared by the file tools and the memory store's containment gate.

use std::path::{Component, Path, PathBuf};

/// Lexical normalisation: drops `.` components and resolves `..` against the components before
/// it (never above the root of an absolute path). No filesystem access, so symlinks are not
/// resolved here: containment gates do that.
///
/// ```
/// use memloop_host::paths::normalize_lexically;
/// use std::path::Path;
/// assert_eq!(normalize_lexically(Path::new("/a/./b/../c/")), Path::new("/a/c"));
/// assert_eq!(normalize_lexically(Path::new("/../x")), Path::new("/x"));
/// assert_eq!(normalize_lexically(Path::new("../x")), Path::new("../x"));
/// ```
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let at_root = matches!(
                    out.components().next_back(),
                    None | Some(Component::RootDir) | Some(Component::Prefix(_))
                );
                if at_root && path.is_absolute() {
                    continue;
                }
                if matches!(out.components().next_back(), Some(Component::ParentDir)) || !out.pop()
                {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` made absolute against the tool context's working directory and lexically normalised
/// (`.` removed, `..` applied). Symlinks are not resolved here: containment gates do that.
///
/// ```
/// use memloop_host::paths::resolve_path;
/// use std::path::Path;
/// assert_eq!(resolve_path(Path::new("/work"), "a/../b.md"), Path::new("/work/b.md"));
/// assert_eq!(resolve_path(Path::new("/work"), "/etc/x"), Path::new("/etc/x"));
/// ```
pub fn resolve_path(cwd: &Path, path: &str) -> PathBuf {
    normalize_lexically(&cwd.join(path))
}
