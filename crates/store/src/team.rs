//! Private and team memory in one memory dir, as Claude Code lays them out: the dir itself is
//! private (its `MEMORY.md` indexes private memories) and its `team/` subdirectory is the team's,
//! with its own `team/MEMORY.md` (entry links relative to `team/`, so the subdirectory is a memory
//! dir of its own: `memloop team push --subdir team` and `TeamSync` sync exactly it). Recall and
//! the manifest see both; each write's index line goes to the index of its scope.

use crate::index::INDEX_FILE;
use crate::types::{MemoryDoc, MemoryError, MemoryType};

/// The team subdirectory of a memory dir.
pub const TEAM_DIR: &str = "team";

/// The team's index, relative to the memory dir.
pub const TEAM_INDEX_FILE: &str = "team/MEMORY.md";

/// Which memory a path belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryScope {
    /// This user's own memory: everything outside `team/`.
    Private,
    /// Shared with the project's team: `team/…`.
    Team,
}

impl MemoryScope {
    /// The scope of a store-relative memory path (`team/deploy.md` is team memory,
    /// `feedback_testing.md` and `topics/x.md` are private).
    ///
    /// ```
    /// use memloop_store::MemoryScope;
    /// assert_eq!(MemoryScope::of("team/发布流程.md"), MemoryScope::Team);
    /// assert_eq!(MemoryScope::of("teams/x.md"), MemoryScope::Private);
    /// ```
    pub fn of(rel_path: &str) -> Self {
        match team_relative(rel_path) {
            Some(_) => Self::Team,
            None => Self::Private,
        }
    }

    /// The index file of the scope, relative to the memory dir: `MEMORY.md` or
    /// `team/MEMORY.md`.
    pub fn index_file(self) -> &'static str {
        match self {
            Self::Private => INDEX_FILE,
            Self::Team => TEAM_INDEX_FILE,
        }
    }

    /// `private` or `team`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Private => "private",
            Self::Team => "team",
        }
    }
}

impl std::fmt::Display for MemoryScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `team/a/b.md` → `a/b.md`: the path relative to the team dir, for a team memory path.
pub fn team_relative(rel_path: &str) -> Option<&str> {
    rel_path
        .strip_prefix(TEAM_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| !rest.is_empty())
}

/// The rule a structured write into team memory obeys beyond every write's: `user` memories
/// (who this user is, how they like to work) are personal and never shared.
pub(crate) fn check_team_write(rel_path: &str, doc: &MemoryDoc) -> Result<(), MemoryError> {
    if MemoryScope::of(rel_path) == MemoryScope::Team && doc.memory_type == Some(MemoryType::User) {
        return Err(MemoryError::InvalidName {
            name: rel_path.to_owned(),
            reason: "`user` memories are personal: save them in private memory (a topic \
                     without the `team/` prefix)"
                .into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_of_paths() {
        assert_eq!(MemoryScope::of("team/deploy.md"), MemoryScope::Team);
        assert_eq!(MemoryScope::of("team/运维/看板.md"), MemoryScope::Team);
        assert_eq!(MemoryScope::of("deploy.md"), MemoryScope::Private);
        assert_eq!(MemoryScope::of("teamwork.md"), MemoryScope::Private);
        assert_eq!(MemoryScope::of("logs/team/x.md"), MemoryScope::Private);
        assert_eq!(team_relative("team/команда.md"), Some("команда.md"));
        assert_eq!(team_relative("team/"), None);
    }

    #[test]
    fn user_memories_stay_private() {
        let user = MemoryDoc::new(
            "役割",
            "ユーザーの役割",
            MemoryType::User,
            "バックエンド担当",
        );
        let err = check_team_write("team/役割.md", &user).unwrap_err();
        assert!(err.to_string().contains("private memory"), "{err}");
        assert!(check_team_write("役割.md", &user).is_ok());
        let project = MemoryDoc::new("发布", "发布日程", MemoryType::Project, "周二发布");
        assert!(check_team_write("team/发布.md", &project).is_ok());
    }
}
