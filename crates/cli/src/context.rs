//! What every command needs: the project, the memory dir resolver, output mode and the streams.

use crate::args::Cli;
use crate::exit::{Exit, Failure};
use anyhow::Context as _;
use memloop_files::FileMemoryStore;
use memloop_host::env::EnvVars;
use memloop_paths::{MemoryDirResolver, ResolvedMemoryDir};
use memloop_store::MemoryStore;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The standard streams, injectable so commands never touch the process's directly.
pub struct Io<'a> {
    /// Results (human text or JSON).
    pub out: &'a mut dyn Write,
    /// Prompts, notes and errors.
    pub err: &'a mut dyn Write,
    /// Answers to prompts.
    pub input: &'a mut dyn BufRead,
    /// Whether `input` is an interactive terminal.
    pub interactive: bool,
}

/// The global options, resolved against the current directory and environment.
#[derive(Debug, Clone)]
pub struct Context {
    /// The project directory (absolute).
    pub project: PathBuf,
    /// `--memory-dir` (absolute).
    pub memory_dir: Option<PathBuf>,
    /// `--claude`.
    pub claude: bool,
    /// `--json`.
    pub json: bool,
    /// The environment the resolver reads.
    pub env: EnvVars,
    /// The current directory relative paths are taken from.
    pub cwd: PathBuf,
    /// `--database-url`: `memory` commands act on the team store.
    pub database_url: Option<String>,
    /// `--team-project`.
    pub team_project: Option<String>,
}

fn absolute(cwd: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

impl Context {
    /// Resolve the global flags of `cli` against `cwd` and `env`.
    pub fn new(cli: &Cli, cwd: PathBuf, env: EnvVars) -> Self {
        Self {
            project: cli
                .project
                .as_deref()
                .map_or_else(|| cwd.clone(), |p| absolute(&cwd, p)),
            memory_dir: cli.memory_dir.as_deref().map(|p| absolute(&cwd, p)),
            claude: cli.claude,
            json: cli.json,
            env,
            cwd,
            #[cfg(feature = "postgres")]
            database_url: cli.database_url.clone(),
            #[cfg(not(feature = "postgres"))]
            database_url: None,
            #[cfg(feature = "postgres")]
            team_project: cli.team_project.clone(),
            #[cfg(not(feature = "postgres"))]
            team_project: None,
        }
    }

    /// The resolver for this project and flags.
    pub fn resolver(&self) -> MemoryDirResolver {
        let base = if self.claude {
            MemoryDirResolver::claude_code(&self.project)
        } else {
            MemoryDirResolver::new(&self.project)
        };
        let base = base.env(self.env.clone());
        match &self.memory_dir {
            Some(dir) => base.override_dir(dir),
            None => base,
        }
    }

    /// Where the memory dir is and why.
    pub fn resolve(&self) -> anyhow::Result<ResolvedMemoryDir> {
        self.resolver()
            .resolve()
            .context("cannot resolve the memory directory")
    }

    /// The store `memory` commands act on: the team store with `--database-url`, else the
    /// memory dir, which must already exist (exit 3 when it does not).
    pub async fn open_existing(&self) -> anyhow::Result<(ResolvedMemoryDir, Arc<dyn MemoryStore>)> {
        let resolved = self.resolve()?;
        if let Some(team) = self.team_store().await? {
            return Ok((resolved, team));
        }
        if !resolved.dir.is_dir() {
            return Err(Failure::new(
                Exit::NotFound,
                format!(
                    "no memory directory at {} (chosen by rule `{}`: {})",
                    resolved.dir.display(),
                    resolved.rule,
                    resolved.reason
                ),
            )
            .into());
        }
        let store = FileMemoryStore::open_resolved(&resolved)?;
        Ok((resolved, Arc::new(store)))
    }

    /// Like [`open_existing`](Self::open_existing), creating the memory dir when needed.
    pub async fn open_or_create(
        &self,
    ) -> anyhow::Result<(ResolvedMemoryDir, Arc<dyn MemoryStore>)> {
        let resolved = self.resolve()?;
        if let Some(team) = self.team_store().await? {
            return Ok((resolved, team));
        }
        let store = FileMemoryStore::open_resolved(&resolved)?;
        Ok((resolved, Arc::new(store)))
    }

    /// The team store when `--database-url` was given.
    #[cfg(feature = "postgres")]
    async fn team_store(&self) -> anyhow::Result<Option<Arc<dyn MemoryStore>>> {
        match &self.database_url {
            Some(url) => Ok(Some(Arc::new(self.open_team(url).await?))),
            None => Ok(None),
        }
    }

    /// Open the team store at `url` for this project (`--team-project`, else the git `origin`
    /// URL, else the project dir's canonical path).
    #[cfg(feature = "postgres")]
    pub async fn open_team(&self, url: &str) -> anyhow::Result<memloop_pg::PgMemoryStore> {
        use anyhow::Context as _;
        let config = match &self.team_project {
            Some(id) => memloop_pg::PgConfig::new(url, id.clone()),
            None => memloop_pg::PgConfig::for_project_dir(url, &self.project),
        };
        memloop_pg::PgMemoryStore::open(config.env(&self.env))
            .await
            .context("opening the team memory store")
    }

    #[cfg(not(feature = "postgres"))]
    async fn team_store(&self) -> anyhow::Result<Option<Arc<dyn MemoryStore>>> {
        Ok(None)
    }
}

/// Write `value` as pretty JSON plus a newline.
pub fn write_json(out: &mut dyn Write, value: &impl serde::Serialize) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).context("writing JSON")?;
    writeln!(out)?;
    Ok(())
}
