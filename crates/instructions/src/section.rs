//! Rendering loaded instructions as a cached system-prompt section.

use super::loaded::{Instructions, LoadOptions};
use super::loader::InstructionLoader;
use async_trait::async_trait;
use memloop_core::prompt::SystemSection;
use std::path::PathBuf;
use std::sync::Arc;

const HEADER: &str = include_str!("../templates/instructions_section.md");

/// Render instruction files as one prompt text: a short header, then each file under a heading
/// with its path and kind, in precedence order. `None` when nothing was loaded.
pub fn render_instructions(instructions: &Instructions) -> Option<String> {
    if instructions.files.is_empty() {
        return None;
    }
    let mut out = String::from(HEADER.trim_end());
    for file in &instructions.files {
        out.push_str("\n\n");
        out.push_str(&format!(
            "## {} ({})\n\n",
            file.path.display(),
            file.kind.label()
        ));
        if let Some(from) = &file.imported_from {
            out.push_str(&format!("(imported from {})\n\n", from.display()));
        }
        out.push_str(file.content.trim());
    }
    out.push('\n');
    Some(out)
}

enum Source {
    Loaded(Arc<Instructions>),
    Live {
        loader: Box<InstructionLoader>,
        working_dir: PathBuf,
        options: LoadOptions,
    },
}

/// The project instructions as a [`SystemSection`] named `instructions`.
///
/// Either fixed (from an [`Instructions`] already loaded) or live (loads on every compute; the
/// [`SystemPrompt`](memloop_core::prompt::SystemPrompt) caches the text until it is invalidated, so
/// files are re-read only after a clear or a compaction).
pub struct InstructionsSection {
    source: Source,
}

impl std::fmt::Debug for InstructionsSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstructionsSection")
    }
}

impl InstructionsSection {
    /// The section name.
    pub const NAME: &'static str = "instructions";

    /// A section rendering an existing load.
    pub fn new(instructions: Instructions) -> Self {
        Self {
            source: Source::Loaded(Arc::new(instructions)),
        }
    }

    /// A section that loads with `loader` each time it is computed.
    pub fn live(loader: InstructionLoader, working_dir: PathBuf, options: LoadOptions) -> Self {
        Self {
            source: Source::Live {
                loader: Box::new(loader),
                working_dir,
                options,
            },
        }
    }
}

#[async_trait]
impl SystemSection for InstructionsSection {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn compute(&self) -> Option<String> {
        match &self.source {
            Source::Loaded(instructions) => render_instructions(instructions),
            Source::Live {
                loader,
                working_dir,
                options,
            } => {
                let (loader, dir, options) = (
                    loader.as_ref().clone(),
                    working_dir.clone(),
                    options.clone(),
                );
                let loaded = tokio::task::spawn_blocking(move || loader.load(&dir, &options)).await;
                match loaded {
                    Ok(Ok(instructions)) => render_instructions(&instructions),
                    Ok(Err(error)) => {
                        tracing::warn!(%error, "project instructions not loaded");
                        None
                    }
                    Err(error) => {
                        tracing::warn!(%error, "instruction loading task failed");
                        None
                    }
                }
            }
        }
    }
}
