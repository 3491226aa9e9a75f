//! # memloop-memory
//!
//! Persistent, file-based memory for memloop agents: the memory dir on disk (`MEMORY.md` index +
//! typed topic files, compatible with Claude Code's format), the [`MemoryStore`] trait and its
//! file implementation, selectors and recall, background extraction, session notes,
//! consolidation, and project-instruction loading.
#![warn(missing_docs)]

pub mod dream;
mod env;
pub mod extract;
mod file_store;
mod frontmatter;
mod index;
mod instructions;
mod manifest;
mod paths;
mod project;
mod prompt;
pub mod recall;
mod safety;
mod scan;
mod scopes;
mod store;
mod template;
mod tools;
mod types;

pub use env::{EnvVars, is_truthy, parse_bool_env};
pub use file_store::{FileMemoryStore, StoreConfig};
pub use frontmatter::{Frontmatter, ParsedMemory, append_to_existing, parse_memory, render_memory};
pub use index::{
    INDEX_FILE, IndexCaps, format_entry_line, load_capped, parse_entries, parse_entry_line,
    remove_entry, upsert_entry,
};
pub use instructions::{
    DEFAULT_TEXT_EXTENSIONS, FileStatus, Glob, InstructionConfig, InstructionError,
    InstructionFile, InstructionKind, InstructionLoader, Instructions, InstructionsSection,
    LoadOptions, LoadReport, MemoryIndexText, ReportEntry, SkipReason, render_instructions,
};
pub use paths::{
    CLAUDE_SETTINGS_KEY, ConfigFlavor, MemoryDirResolver, ResolutionRule, ResolvedMemoryDir,
    SETTINGS_KEY, validate_memory_dir,
};
pub use project::{canonical_project_root, find_git_root, project_dir, project_slug};
pub use prompt::MemorySection;
pub use safety::{
    ContainmentGate, DirLock, LOCK_FILE, SecretFilter, SecretPattern, TEMP_PREFIX, atomic_write,
    normalize_lexically, topic_to_rel_path, validate_rel_path, validate_topic,
};
pub use scan::{HeaderCache, ScanConfig, scan_dir, scan_dir_cached};

pub use manifest::{format_manifest, format_manifest_capped, format_mtime, manifest_line};
pub use scopes::{
    AgentMemoryDir, AgentMemoryScope, AgentMemoryScopes, ScopeError, sanitize_agent_type,
};
pub use store::MemoryStore;
pub use template::render_template;
pub use tools::{
    INDEX_TOPIC, LIST_TOPIC, MEMORY_READ, MEMORY_WRITE, MemoryReadTool, MemoryWriteTool,
    memory_tools,
};
pub use types::{
    IndexEntry, LoadedIndex, MemoryDoc, MemoryError, MemoryFile, MemoryHeader, MemoryType,
    WriteMode, WriteReport,
};

pub mod session_memory;
