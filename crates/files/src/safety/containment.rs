//! The one write-containment gate: every tool and store write goes through it.

use memloop_host::paths::normalize_lexically;
use memloop_store::MemoryError;
use std::path::{Path, PathBuf};

/// Decides whether a path is inside the memory dir: the target is normalised, the deepest
/// existing ancestor is resolved through symlinks (as is the target itself when it exists), and
/// the result must start with the canonical memory dir plus a separator. The dir itself, `..`
/// escapes, absolute paths elsewhere and symlinks pointing outside are refused.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use memloop_files::ContainmentGate;
/// let dir = tempfile::tempdir()?;
/// let gate = ContainmentGate::new(dir.path())?;
/// assert!(gate.check("notes.md".as_ref()).is_ok());
/// assert!(gate.check("../escape.md".as_ref()).is_err());
/// assert!(gate.check("/etc/passwd".as_ref()).is_err());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainmentGate {
    root: PathBuf,
    /// The root's identity (device and inode) when the gate was made: while the root's path
    /// still reaches that directory, a path below it with no symlink among its components is
    /// inside as it is (see [`ContainmentGate::check`]).
    identity: Option<Identity>,
}

/// A directory's device and inode.
type Identity = (u64, u64);

/// The identity of what `path` reaches, links followed (`None` where the platform has none).
fn identity(path: &Path) -> Option<Identity> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

impl ContainmentGate {
    /// A gate for `root`, which must exist; it is canonicalised once here.
    pub fn new(root: &Path) -> Result<Self, MemoryError> {
        let root = std::fs::canonicalize(root)
            .map_err(|e| MemoryError::io(format!("resolving memory dir {}", root.display()), e))?;
        let identity = identity(&root);
        Ok(Self { root, identity })
    }

    /// The canonical memory dir.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `Ok(resolved)` when `path` (absolute, or relative to the root) is strictly inside the
    /// memory dir after normalisation and symlink resolution. Quiet: it logs nothing, so it
    /// also serves as a plain question; refusal paths use [`check_write`](Self::check_write).
    pub fn check(&self, path: &Path) -> Result<PathBuf, MemoryError> {
        let outside = |p: &Path| MemoryError::OutsideMemoryDir {
            path: p.to_path_buf(),
            root: self.root.clone(),
        };
        if path.as_os_str().as_encoded_bytes().contains(&0) {
            return Err(outside(path));
        }
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        };
        let normal = normalize_lexically(&joined);
        if self.plainly_inside(&normal) {
            return Ok(normal);
        }
        let resolved = resolve_existing_prefix(&normal).ok_or_else(|| outside(path))?;
        if resolved != self.root && resolved.starts_with(&self.root) {
            Ok(resolved)
        } else {
            Err(outside(path))
        }
    }

    /// Whether `normal` (absolute, normalised) is strictly below the root with nothing in
    /// between that resolution could move: the root's path still reaches the directory the
    /// gate was made for (an ancestor swapped for a link elsewhere reaches another), and no
    /// existing component below it is a symlink. Such a path resolves to itself, found with
    /// one `stat` and an `lstat` per existing component instead of resolving every component
    /// from `/`. Anything else (a link, an unreadable component, a root that moved) takes the
    /// full resolution.
    fn plainly_inside(&self, normal: &Path) -> bool {
        let Some(expected) = self.identity else {
            return false;
        };
        let Ok(rest) = normal.strip_prefix(&self.root) else {
            return false;
        };
        if rest.as_os_str().is_empty() || identity(&self.root) != Some(expected) {
            return false;
        }
        let mut at = self.root.clone();
        for part in rest.components() {
            let std::path::Component::Normal(name) = part else {
                return false;
            };
            at.push(name);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => return false,
                Ok(_) => {}
                // The rest does not exist yet: nothing below can be a link.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
                Err(_) => return false,
            }
        }
        true
    }

    /// Whether `path` is inside the memory dir ([`check`](Self::check) as a yes/no question,
    /// logging nothing).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use memloop_files::ContainmentGate;
    /// let dir = tempfile::tempdir()?;
    /// let gate = ContainmentGate::new(dir.path())?;
    /// assert!(gate.contains("notes.md".as_ref()));
    /// assert!(!gate.contains("/etc/passwd".as_ref()));
    /// # Ok(()) }
    /// ```
    pub fn contains(&self, path: &Path) -> bool {
        self.check(path).is_ok()
    }

    /// [`check`](Self::check) for a write about to happen: a refusal is logged as a warning.
    pub fn check_write(&self, path: &Path) -> Result<PathBuf, MemoryError> {
        self.check(path).inspect_err(warn_refused)
    }

    /// The gate as a closure, for a tool permission gate that admits writes inside this memory dir
    /// only (`memloop_core::tool::WriteScopeGate::new`); refusals are logged.
    pub fn as_contains_fn(&self) -> impl Fn(&Path) -> Result<(), String> + Send + Sync + 'static {
        let gate = self.clone();
        move |p: &Path| gate.check_write(p).map(|_| ()).map_err(|e| e.to_string())
    }
}

/// Log a refused write (the one place the refusal warning is written).
pub fn warn_refused(error: &MemoryError) {
    tracing::warn!(%error, "write refused: outside the memory dir");
}

/// Canonicalise the deepest existing ancestor of `path` (which is absolute and normalised) and
/// append the rest. `None` when a component is a dangling symlink (it could point anywhere).
pub fn resolve_existing_prefix(path: &Path) -> Option<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match std::fs::symlink_metadata(&existing) {
            Ok(_) => break,
            Err(_) => {
                let name = existing.file_name()?.to_os_string();
                rest.push(name);
                if !existing.pop() {
                    return None;
                }
            }
        }
    }
    // A dangling symlink makes canonicalize fail: refuse rather than guess.
    let mut resolved = std::fs::canonicalize(&existing).ok()?;
    for name in rest.into_iter().rev() {
        resolved.push(name);
    }
    Some(resolved)
}
