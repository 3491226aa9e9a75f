//! # memloop-instructions
//!
//! Project instructions: the CLAUDE.md / AGENTS.md family of files, their
//! `@path` imports, conditional rules, the load report, and the system-prompt section.
//!
//! **Load order** (later wins): managed (`/etc/<app>/<file>` and `rules/**/*.md`), user
//! (`<base>/<file>` and `rules/**/*.md`), then every directory from the project root down to the
//! working dir (`CLAUDE.md`, `.claude/CLAUDE.md`, `.claude/rules/**/*.md` sorted by path,
//! `CLAUDE.local.md`), then the memory index handed in by the caller. An importing file comes
//! right before the files it imports.
//!
//! **Top of the walk**: the configured project root, else the nearest enclosing git root (a
//! `.git` dir or file, so a worktree is its own top), else the working dir alone. Files above the
//! repository are never read, so a stray `/tmp/CLAUDE.md` cannot inject instructions.
//!
//! **Imports**: `@` at the start of the text or right after whitespace, in Markdown text only
//! (not in fenced or indented code, code spans, HTML blocks, inline HTML or HTML comments),
//! followed by a token up to the next unescaped whitespace (`\ ` is a space) that starts with
//! `./`, `../`, `~/`, `/`, a letter, digit, `_` or `.`. `#fragment` and trailing sentence
//! punctuation are dropped. The path resolves relative to the importing file (`~/` to the home
//! dir). A token whose extension is a text extension is an import (a missing target is reported
//! `missing`); a token with a `/` that names an existing non-text file is reported `not_text`;
//! anything else (`me@example.com`, `@pytest.mark.benchmark`, `@types/node`, `@alice`) is plain
//! text. Each file loads at most once per load (canonical path, so symlinks and cycles are
//! harmless), imports go at most [`InstructionConfig::max_include_depth`] levels deep, and files of
//! the project (project, local, project rules) may import only inside the project root unless
//! [`InstructionConfig::allow_outside_project`] is set (`~/` imports included). Managed and user
//! files are the user's own and may import from anywhere.
//!
//! **Content**: YAML frontmatter and block-level HTML comments are removed; `@path` lines stay.
//! Rules with `paths:` frontmatter load only when a touched file (relative to the directory that
//! holds the `.claude/` dir; the project root for managed and user rules) matches one of the
//! globs; rules without `paths:` always load.

#![warn(missing_docs)]

mod config;
mod loaded;
mod loader;
mod markdown;
mod report;
mod rule_pattern;
mod rules;
mod section;
mod walk;

pub use config::{DEFAULT_TEXT_EXTENSIONS, InstructionConfig};
pub use loaded::{InstructionFile, Instructions, LoadOptions, MemoryIndexText};
pub use loader::{InstructionError, InstructionLoader};
pub use report::{FileStatus, InstructionKind, LoadReport, ReportEntry, SkipReason};
pub use rule_pattern::RulePattern;
pub use section::{InstructionsSection, render_instructions};
