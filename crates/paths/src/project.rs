//! Project identity for the default memory dir: the slug rule and the canonical
//! git root (linked worktrees share their main repository's root, hence one memory dir).

use memloop_host::paths::normalize_lexically;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Longest slug kept before the hash suffix.
pub const MAX_SLUG_LEN: usize = 200;

/// The slug of a path: every character outside `[A-Za-z0-9]` becomes `-`, counted in UTF-16
/// code units like Claude Code (a non-BMP character such as an emoji becomes `--`). Slugs over
/// 200 characters keep the first 200 and get `-` plus the first 8 hex digits of the SHA-256 of
/// the full path.
///
/// ```
/// use memloop_paths::project_slug;
/// assert_eq!(project_slug("/home/ann/my repo"), "-home-ann-my-repo");
/// assert_eq!(project_slug("/tmp/é😀"), "-tmp----"); // é → -, 😀 (two UTF-16 units) → --
/// ```
pub fn project_slug(path: &str) -> String {
    let mut slug = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else {
            (0..c.len_utf16()).for_each(|_| slug.push('-'));
        }
    }
    if slug.len() <= MAX_SLUG_LEN {
        return slug;
    }
    let digest = Sha256::digest(path.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}", &slug[..MAX_SLUG_LEN])
}

/// A git origin URL without the `user:password@` of its authority: how an origin names a
/// project (a team project id, a token's `origin:` grant), so a credential in a remote URL is
/// never stored, logged or compared.
///
/// ```
/// use memloop_paths::origin_without_credentials as bare;
/// assert_eq!(bare("https://alice:ghp_x1@github.com/acme/api.git"), "https://github.com/acme/api.git");
/// assert_eq!(bare("https://oauth2:glpat-XYZ@gitlab.example.com/g/p"), "https://gitlab.example.com/g/p");
/// assert_eq!(bare("https://github.com/acme/a@b.git"), "https://github.com/acme/a@b.git");
/// assert_eq!(bare("git@github.com:acme/api.git"), "git@github.com:acme/api.git");
/// ```
pub fn origin_without_credentials(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host_end = rest.find('/').unwrap_or(rest.len());
            match rest[..host_end].rfind('@') {
                Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
                None => url.to_owned(),
            }
        }
        None => url.to_owned(),
    }
}

/// The nearest directory at or above `start` holding a `.git` entry (dir or file).
pub fn find_git_root(start: &Path) -> Option<PathBuf> {
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| normalize_lexically(start));
    start
        .ancestors()
        .find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .map(Path::to_path_buf)
}

fn read_trimmed(p: &Path) -> Option<String> {
    memloop_host::files::read_regular_to_string(p)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn absolute_from(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    normalize_lexically(&if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    })
}

fn real(p: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(p).ok()
}

/// For a linked worktree root (`.git` is a `gitdir:` file), the main repository's root (or the
/// common dir itself for a bare repo), once the gitdir is checked to sit in
/// `<commondir>/worktrees` and to point back at `<root>/.git`; `None` when any check fails.
fn main_root_of_worktree(root: &Path) -> Option<PathBuf> {
    let dotgit = root.join(".git");
    if !std::fs::symlink_metadata(&dotgit).ok()?.is_file() {
        return None;
    }
    let content = read_trimmed(&dotgit)?;
    let gitdir = absolute_from(root, content.strip_prefix("gitdir:")?.trim());
    let commondir = absolute_from(&gitdir, &read_trimmed(&gitdir.join("commondir"))?);
    if real(gitdir.parent()?)? != real(&commondir.join("worktrees"))? {
        tracing::debug!(root = %root.display(), "worktree check failed: gitdir not under <commondir>/worktrees");
        return None;
    }
    let back = absolute_from(&gitdir, &read_trimmed(&gitdir.join("gitdir"))?);
    if real(&back)? != real(root)?.join(".git") {
        tracing::debug!(root = %root.display(), "worktree check failed: back-pointer mismatch");
        return None;
    }
    let common = real(&commondir)?;
    if common.file_name().is_some_and(|n| n == ".git") {
        common.parent().map(Path::to_path_buf)
    } else {
        Some(common)
    }
}

/// The canonical project root of `start`: the git root, mapped from a linked worktree to its
/// main repository when every check passes; the start dir itself when not in git.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let root = std::fs::canonicalize(dir.path())?;
/// assert_eq!(memloop_paths::canonical_project_root(&root), root);
/// # Ok(()) }
/// ```
pub fn canonical_project_root(start: &Path) -> PathBuf {
    match find_git_root(start) {
        Some(root) => main_root_of_worktree(&root).unwrap_or(root),
        None => std::fs::canonicalize(start).unwrap_or_else(|_| normalize_lexically(start)),
    }
}

/// `<base>/projects/<slug>` for a project (session memory lives in
/// `<that>/<session-id>/session-memory/summary.md`, memories in `<that>/memory/`).
pub fn project_dir(base: &Path, project: &Path) -> PathBuf {
    root_dir(base, &canonical_project_root(project))
}

/// [`project_dir`] of a project whose [`canonical_project_root`] is `root`.
pub(crate) fn root_dir(base: &Path, root: &Path) -> PathBuf {
    base.join("projects")
        .join(project_slug(&root.to_string_lossy()))
}
