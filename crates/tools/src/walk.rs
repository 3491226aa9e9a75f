//! A small recursive file walk shared by `glob` and `grep`.

use std::path::{Path, PathBuf};

/// Directory names never descended into.
const SKIP_DIRS: [&str; 3] = [".git", "node_modules", "target"];

/// Regular files under `root` (or `root` itself when it is a file), depth-first, sorted per
/// directory, without following symlinked directories, stopping after `max` files.
/// Unreadable directories are skipped with a `tracing` debug line.
pub(crate) fn files_under(root: &Path, max: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if root.is_file() {
        out.push(root.to_path_buf());
        return out;
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "skipping unreadable directory");
                continue;
            }
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in entries {
            let Ok(ft) = e.file_type() else { continue };
            let path = e.path();
            if ft.is_dir() {
                let name = e.file_name();
                if !SKIP_DIRS.iter().any(|s| name == *s) {
                    subdirs.push(path);
                }
            } else if ft.is_file() || (ft.is_symlink() && path.is_file()) {
                out.push(path);
                if out.len() >= max {
                    return out;
                }
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    out
}
