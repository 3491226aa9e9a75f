//! `init_project`'s onboarding: the usage block in the project's `CLAUDE.md`, between markers,
//! so a later run replaces only the block and never touches the rest of the file.

use std::io::Write;
use std::path::Path;

/// The line that opens the block.
pub const BLOCK_BEGIN: &str = "<!-- memloop:begin (written by memloop init_project) -->";
/// The line that closes the block.
pub const BLOCK_END: &str = "<!-- memloop:end -->";

/// How to use the memory tools, for the model reading `CLAUDE.md`.
pub const USAGE_BLOCK: &str = "## Project memory (memloop)

This project's memory is served by the memloop MCP server.

- At the start of every session, call `context_load` with this project's absolute path to get
  the overview: recent sessions, pending items, active decisions.
- Call `context_search` only when a question needs history (why something was decided, what
  happened before); do not search on every turn.
- Before the session ends, call `context_save` once, with all entries in one batch:
  1. a `session_summary` (what was done, key decisions, problems met);
  2. each new `todo`;
  3. each `decision` worth keeping (architecture, technology choices).
- Never save credentials.";

/// What happened to `CLAUDE.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockWrite {
    /// The file did not exist and was created with the block.
    Created,
    /// The block was added to, or replaced in, an existing file.
    Updated,
    /// The file already held this block.
    Unchanged,
}

impl BlockWrite {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
        }
    }
}

/// `text` with the block put in: replaced between existing markers, else appended.
fn with_block(text: &str) -> String {
    let block = format!("{BLOCK_BEGIN}\n{USAGE_BLOCK}\n{BLOCK_END}");
    if let Some(start) = text.find(BLOCK_BEGIN)
        && let Some(end_rel) = text[start..].find(BLOCK_END)
    {
        let end = start + end_rel + BLOCK_END.len();
        return format!("{}{block}{}", &text[..start], &text[end..]);
    }
    if text.trim().is_empty() {
        return format!("{block}\n");
    }
    let sep = if text.ends_with("\n\n") {
        ""
    } else if text.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    format!("{text}{sep}{block}\n")
}

/// Put the usage block into `<project>/CLAUDE.md` (atomically; a symlinked `CLAUDE.md` is
/// refused rather than followed).
pub(crate) fn write_usage_block(project: &Path) -> Result<BlockWrite, String> {
    let path = project.join("CLAUDE.md");
    let old = match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(format!(
                "{} is a symbolic link; not following it (add the block by hand)",
                path.display()
            ));
        }
        Ok(m) if !m.is_file() => return Err(format!("{} is not a file", path.display())),
        Ok(_) => Some(
            std::fs::read_to_string(&path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    let new = with_block(old.as_deref().unwrap_or(""));
    if old.as_deref() == Some(new.as_str()) {
        return Ok(BlockWrite::Unchanged);
    }
    let mut tmp = tempfile::Builder::new()
        .prefix(".CLAUDE.md.memloop-")
        .tempfile_in(project)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    if let Ok(meta) = std::fs::metadata(&path) {
        let _ = tmp.as_file().set_permissions(meta.permissions());
    }
    tmp.write_all(new.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    tmp.persist(&path)
        .map_err(|e| format!("writing {}: {}", path.display(), e.error))?;
    Ok(if old.is_some() {
        BlockWrite::Updated
    } else {
        BlockWrite::Created
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_block_is_replaced_between_markers_and_the_rest_kept() {
        let once = with_block("# Title\n\nrules\n");
        assert!(once.starts_with("# Title\n\nrules\n\n<!-- memloop:begin"));
        assert_eq!(with_block(&once), once);
        let edited = once.replace("Never save credentials.", "old text") + "\nafter\n";
        let again = with_block(&edited);
        assert!(again.ends_with(&format!("{BLOCK_END}\n\nafter\n")));
        assert!(!again.contains("old text"));
        assert_eq!(again.matches(BLOCK_BEGIN).count(), 1);
    }
}
