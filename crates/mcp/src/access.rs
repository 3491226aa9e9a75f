//! What a request may do: the one place the server decides authorization.
//!
//! A request carries an [`Access`]: everything (stdio, a server without tokens, a token line
//! with no grant), or what one token line grants ([`Grant`]: a project glob, a git origin, a
//! project id). The decision is taken on the [`MemoryKey`] the request's memory is stored under,
//! never on the string a client sent: [`Access::permit`] lets a request in only when every
//! project path that maps to that key lies inside the grant ([`Grant::covers`]), so two paths
//! sharing one memory (a git root above a glob, one origin, one slug) cannot be used to reach
//! past it. [`Access::permit_global`] keeps the global memory, which every project sees,
//! writable only by tokens that may write everywhere. Each tool declares its [`Effect`] next to
//! its arguments (`ToolRequest` in `server.rs`), so whether a call writes is never inferred from
//! a list of tool names.

use crate::key::{MemoryKey, Reach};
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

    /// Whether every path at or under `root` (canonical) matches: the glob matches `root`, ends
    /// with `*`, and what comes before its last `*`s matches a prefix of `root/`. (A glob that
    /// does not end with `*` cannot match every extension of a path; one that does matches
    /// every extension exactly when the part before its trailing `*`s matches a prefix.)
    pub fn covers_tree(&self, root: &Path) -> bool {
        if !self.matches(root) || !self.0.ends_with('*') {
            return false;
        }
        let head = self.0.trim_end_matches('*');
        let under = format!("{}/", root.to_string_lossy().trim_end_matches('/'));
        under
            .char_indices()
            .map(|(i, _)| i)
            .chain([under.len()])
            .any(|end| glob_match(head, &under[..end]))
    }

    /// The glob, as matched.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a token line grants: the memories it reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// Every project, and the global memory.
    Everything,
    /// The projects whose memory only paths matching this glob reach (see [`Reach`]): a
    /// memory shared with a path outside the glob (a git root above it, a slug or an origin
    /// shared with another directory) is refused.
    Paths(ProjectGlob),
    /// The team project keyed by this git origin (credentials removed), through any of its
    /// checkouts the server serves: the grant for one memory shared by every checkout
    /// (`origin:URL` in a token file).
    Origin(String),
    /// The memory stored under this key id (a team project id such as `dir:/srv/app`, or a
    /// memory dir's path): `project:ID` in a token file.
    Project(String),
}

impl Grant {
    /// A token file's grant field: `origin:URL`, `project:ID`, or a project glob.
    pub fn parse(field: &str) -> Result<Self, String> {
        if let Some(url) = field.strip_prefix("origin:") {
            return non_empty(url, "origin:")
                .map(|u| Self::Origin(memloop_paths::origin_without_credentials(u)));
        }
        if let Some(id) = field.strip_prefix("project:") {
            return non_empty(id, "project:").map(|id| Self::Project(id.to_owned()));
        }
        ProjectGlob::new(field).map(Self::Paths)
    }

    /// Whether every project path that maps to `key` lies inside this grant.
    pub fn covers(&self, key: &MemoryKey) -> bool {
        match (self, &key.reach) {
            (Self::Everything, _) => true,
            (Self::Paths(glob), Reach::Dir(dir)) => glob.matches(dir),
            (Self::Paths(glob), Reach::Tree(root)) => glob.covers_tree(root),
            (Self::Origin(url), Reach::Origin(origin)) => url == origin,
            (Self::Project(id), _) => *id == key.id && key.reach != Reach::Anyone,
            _ => false,
        }
    }
}

fn non_empty<'a>(value: &'a str, prefix: &str) -> Result<&'a str, String> {
    if value.trim().is_empty() {
        Err(format!("`{prefix}` needs a value"))
    } else {
        Ok(value)
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
/// use memloop_mcp::{Access, Grant, ProjectGlob, TokenScope};
/// let limited = Access::new(Grant::Paths(ProjectGlob::new("/srv/app*").unwrap()), TokenScope::Write);
/// assert!(!limited.may_write_global());
/// assert!(Access::full().may_write_global());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    grant: Grant,
    scope: TokenScope,
}

/// Why a request was refused by its [`Access`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub String);

impl Denied {
    /// The one refusal for a project outside a token's grant: the same text whatever lies
    /// there (a path that exists or not, a symlink's target, another project's memory), so a
    /// limited token learns nothing about the server's disk.
    pub fn outside() -> Self {
        Self(
            "this token's grant does not cover the memory of that project_path (or no such \
             project is served)"
                .into(),
        )
    }
}

impl Access {
    /// Everything: every project, reads and writes, the global memory.
    pub fn full() -> Self {
        Self {
            grant: Grant::Everything,
            scope: TokenScope::Write,
        }
    }

    /// The memories `grant` reaches, with `scope`.
    pub fn new(grant: Grant, scope: TokenScope) -> Self {
        Self { grant, scope }
    }

    /// What this access grants.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// Whether this access is limited to some projects.
    pub fn is_limited(&self) -> bool {
        self.grant != Grant::Everything
    }

    /// Whether this access may write the global memory: only one that may write every project.
    pub fn may_write_global(&self) -> bool {
        !self.is_limited() && self.scope == TokenScope::Write
    }

    /// May this request do `effect` on the memory stored under `key`? Only if every project
    /// path mapping to `key` lies inside the grant ([`Grant::covers`]).
    pub fn permit(&self, key: &MemoryKey, effect: Effect) -> Result<(), Denied> {
        self.permit_effect(effect)?;
        if self.grant.covers(key) {
            Ok(())
        } else {
            Err(Denied::outside())
        }
    }

    /// Whether this access may be told about the project at `canonical` (why it is not
    /// served, say): a path grant whose glob matches it, or a grant for everything. Anything
    /// else gets [`Denied::outside`] and nothing more.
    pub(crate) fn may_know(&self, canonical: &Path) -> bool {
        match &self.grant {
            Grant::Everything => true,
            Grant::Paths(glob) => glob.matches(canonical),
            Grant::Origin(_) | Grant::Project(_) => false,
        }
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
    pub(crate) fn unresolvable(&self, effect: Effect) -> Option<Denied> {
        if let Err(denied) = self.permit_effect(effect) {
            return Some(denied);
        }
        self.is_limited().then(Denied::outside)
    }

    /// Refuse a write by a read-only token.
    pub(crate) fn permit_effect(&self, effect: Effect) -> Result<(), Denied> {
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
    fn a_glob_covers_a_tree_only_when_it_matches_every_path_under_it() {
        let glob = |g: &str| ProjectGlob(g.to_owned());
        let root = Path::new("/srv/mono");
        assert!(glob("/srv/mono*").covers_tree(root));
        assert!(glob("/srv/*").covers_tree(root));
        assert!(glob("*").covers_tree(root));
        assert!(glob("/srv/mono/**").covers_tree(Path::new("/srv/mono/x")));
        // A glob under the root, one that matches the root only, one with a literal tail.
        assert!(!glob("/srv/mono/payments*").covers_tree(root));
        assert!(!glob("/srv/mono").covers_tree(root));
        assert!(!glob("/srv/mono*x").covers_tree(root));
        assert!(!glob("/srv/mon*o").covers_tree(root));
        assert!(glob("/srv/团*").covers_tree(Path::new("/srv/团队")));
    }

    #[test]
    fn grants_cover_keys_by_every_path_that_maps_to_them() {
        let key = |reach: Reach| MemoryKey {
            id: "k".into(),
            reach,
        };
        let paths = Grant::Paths(ProjectGlob("/srv/app*".into()));
        assert!(paths.covers(&key(Reach::Dir("/srv/app1".into()))));
        assert!(paths.covers(&key(Reach::Tree("/srv/app1".into()))));
        assert!(!paths.covers(&key(Reach::Tree("/srv".into()))));
        assert!(!paths.covers(&key(Reach::Origin("git@h:o/app.git".into()))));
        assert!(!paths.covers(&key(Reach::Anyone)));
        let origin = Grant::parse("origin:https://u:p@h.example/o/app.git").unwrap();
        assert_eq!(origin, Grant::Origin("https://h.example/o/app.git".into()));
        assert!(origin.covers(&key(Reach::Origin("https://h.example/o/app.git".into()))));
        assert!(!origin.covers(&key(Reach::Origin("https://h.example/o/other.git".into()))));
        assert!(!origin.covers(&key(Reach::Dir("/srv/app".into()))));
        let project = Grant::parse("project:k").unwrap();
        assert!(project.covers(&key(Reach::Dir("/anywhere".into()))));
        assert!(!project.covers(&key(Reach::Anyone)));
        assert!(Grant::Everything.covers(&key(Reach::Anyone)));
        assert!(Grant::parse("origin:").is_err());
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
