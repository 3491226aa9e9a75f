//! What a request may do: the one place the server decides authorization.
//!
//! A request carries an [`Access`]: everything (stdio, a server without tokens, a token line
//! with neither a project glob nor `read`), or what one token line allows. The decision is
//! taken on the *resolved* project, after its path was made canonical (`..` removed, symlinks
//! followed), never on the string a client sent: [`Access::permit`] matches the token's glob
//! against the canonical path, and [`Access::permit_global`] keeps the global memory, which
//! every project sees, writable only by tokens that may write everywhere. Each tool declares
//! its [`Effect`] next to its arguments (`ToolRequest` in `server.rs`), so whether a call
//! writes is never inferred from a list of tool names.

use std::path::{Path, PathBuf};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenScope {
    /// `context_load`, `context_search`, `context_manage list`, resources.
    Read,
    /// Everything, including `context_save` and `context_manage` `update` / `delete` /
    /// `init_project`.
    Write,
}

/// Whether a request only reads or also changes memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads memory (load, search, list, resources).
    Read,
    /// Changes memory (save, update, delete, init_project).
    Write,
}

/// A `*`-glob over canonical project paths: `*` matches any run of characters (also `/`),
/// everything else matches itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectGlob(String);

impl ProjectGlob {
    /// The glob as written, with the existing directories before its first `*` made canonical
    /// (so `/srv/repos/payments*` still matches when `/srv` is a symlink), and `.`/`..`
    /// segments refused: a glob is compared with canonical paths, which have none.
    pub fn new(glob: &str) -> Result<Self, String> {
        if !glob.starts_with(['/', '*']) && !Path::new(glob).is_absolute() {
            return Err("a project glob must be an absolute path (or start with `*`)".into());
        }
        if glob.split(['/', '\\']).any(|seg| seg == "." || seg == "..") {
            return Err("a project glob may not contain `.` or `..` segments".into());
        }
        let literal = &glob[..glob.find('*').unwrap_or(glob.len())];
        // The deepest existing directory of the literal part: canonicalise it, keep the rest.
        let mut dir = PathBuf::from(literal);
        if !literal.ends_with('/') {
            dir.pop();
        }
        while !dir.as_os_str().is_empty() {
            if let Ok(canonical) = std::fs::canonicalize(&dir)
                && let Some(rest) = glob.strip_prefix(dir.to_string_lossy().as_ref())
            {
                let canonical = canonical.to_string_lossy();
                let sep = if canonical.ends_with('/') || rest.starts_with('/') || rest.is_empty() {
                    ""
                } else {
                    "/"
                };
                return Ok(Self(format!("{canonical}{sep}{rest}")));
            }
            if !dir.pop() {
                break;
            }
        }
        Ok(Self(glob.to_owned()))
    }

    /// Whether `path` (canonical) matches.
    pub fn matches(&self, path: &Path) -> bool {
        glob_match(&self.0, &path.to_string_lossy())
    }

    /// The glob, as matched.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What one request may do. Built by the HTTP transport from the token it presented; stdio and
/// servers without tokens use [`Access::full`]. A host serving [`MemoryServer`] over a
/// transport of its own restricts a request by putting an `Access` into the extensions of the
/// request's `http::request::Parts` (as [`serve_http`] does); a request without one has full
/// access.
///
/// [`MemoryServer`]: crate::MemoryServer
/// [`serve_http`]: crate::serve_http
///
/// ```
/// use memloop_mcp::{Access, ProjectGlob, TokenScope};
/// let limited = Access::new(Some(ProjectGlob::new("/srv/app*").unwrap()), TokenScope::Write);
/// assert!(!limited.may_write_global());
/// assert!(Access::full().may_write_global());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    projects: Option<ProjectGlob>,
    scope: TokenScope,
}

/// Why a request was refused by its [`Access`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub String);

impl Access {
    /// Everything: every project, reads and writes, the global memory.
    pub fn full() -> Self {
        Self {
            projects: None,
            scope: TokenScope::Write,
        }
    }

    /// The projects matching `projects` (`None`: every project), with `scope`.
    pub fn new(projects: Option<ProjectGlob>, scope: TokenScope) -> Self {
        Self { projects, scope }
    }

    /// Whether this access is limited to some projects.
    pub fn is_limited(&self) -> bool {
        self.projects.is_some()
    }

    /// Whether this access may write the global memory: only one that may write every project.
    pub fn may_write_global(&self) -> bool {
        self.projects.is_none() && self.scope == TokenScope::Write
    }

    /// May this request do `effect` on the project at `canonical` (a resolved, canonical
    /// path: never the string a client sent)?
    pub fn permit(&self, canonical: &Path, effect: Effect) -> Result<(), Denied> {
        self.permit_path(canonical)?;
        self.permit_effect(effect)
    }

    /// May this request do `effect` on the global memory? Reading it is open to every project
    /// (every project sees it); writing it changes every project, so it needs a token that may
    /// write everywhere.
    pub fn permit_global(&self, effect: Effect) -> Result<(), Denied> {
        self.permit_effect(effect)?;
        if effect == Effect::Write && !self.may_write_global() {
            return Err(Denied(
                "this token is limited to some projects; the global memory is shared by every \
                 project, so it may not write there (save without `global`)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The refusal for a project path that could not be resolved, if this access is refused
    /// there whatever the path: a read-only token writing, or a limited token, which learns
    /// nothing about paths outside its projects (not even whether they exist).
    pub(crate) fn unresolvable(&self, raw: &str, effect: Effect) -> Option<Denied> {
        if let Err(denied) = self.permit_effect(effect) {
            return Some(denied);
        }
        self.projects
            .as_ref()
            .map(|_| Denied(format!("this token is not valid for project {raw}")))
    }

    fn permit_path(&self, canonical: &Path) -> Result<(), Denied> {
        match &self.projects {
            Some(glob) if !glob.matches(canonical) => Err(Denied(format!(
                "this token is not valid for project {}",
                canonical.display()
            ))),
            _ => Ok(()),
        }
    }

    fn permit_effect(&self, effect: Effect) -> Result<(), Denied> {
        if effect == Effect::Write && self.scope == TokenScope::Read {
            return Err(Denied("this token is read-only; this call writes".into()));
        }
        Ok(())
    }
}

/// `*` matches any run of characters (also `/`); everything else matches itself.
fn glob_match(glob: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn globs_match_paths_in_any_script() {
        assert!(glob_match("/srv/app*", "/srv/app1"));
        assert!(glob_match("*", "/x/y"));
        assert!(glob_match("/srv/*/api", "/srv/团队/api"));
        assert!(!glob_match("/srv/app*", "/srv/other"));
        assert!(!glob_match("/srv/app", "/srv/app2"));
    }

    #[test]
    fn globs_with_dot_segments_or_relative_are_refused() {
        assert!(ProjectGlob::new("/srv/../x*").is_err());
        assert!(ProjectGlob::new("/srv/./x*").is_err());
        assert!(ProjectGlob::new("srv/x*").is_err());
        assert!(ProjectGlob::new("*").is_ok_and(|g| g.matches(Path::new("/any/where"))));
    }

    #[cfg(unix)]
    #[test]
    fn a_glob_through_a_symlinked_dir_matches_canonical_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(tmp.path()).unwrap().join("real");
        std::fs::create_dir_all(real.join("payments-x")).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let glob = ProjectGlob::new(&format!("{}/payments*", link.display())).unwrap();
        assert!(glob.matches(&real.join("payments-x")), "{glob:?}");
        assert!(!glob.matches(&real.join("other")));
    }
}
