//! Project instructions (SPEC section 11): the CLAUDE.md / AGENTS.md family of files, their
//! `@path` imports, conditional rules, the load report, and the system-prompt section.
//!
//! Load order (later wins): managed (`/etc/<app>/`), user (`<base>/`), then every directory from
//! the project root down to the working dir (`CLAUDE.md`, `.claude/CLAUDE.md`,
//! `.claude/rules/**/*.md`, `CLAUDE.local.md`), then the memory index. The project root is the
//! configured one, else the nearest enclosing git root, else the working dir: files above the
//! repository are never read, so a stray `/tmp/CLAUDE.md` cannot inject instructions.

mod config;
mod glob;
mod loader;
mod markdown;
mod report;
mod rules;
mod section;
mod walk;

pub use config::{DEFAULT_TEXT_EXTENSIONS, InstructionConfig};
pub use glob::Glob;
pub use loader::{
    InstructionError, InstructionFile, InstructionLoader, Instructions, LoadOptions,
    MemoryIndexText,
};
pub use report::{FileStatus, InstructionKind, LoadReport, ReportEntry, SkipReason};
pub use section::{InstructionsSection, render_instructions};
