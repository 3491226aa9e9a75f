//! Models by name: the ones memloop knows, where the Hugging Face cache keeps them, the model a
//! host uses when it names none, and (feature `hub`) fetching one as users do.

use crate::CandleEmbedder;
use memloop_host::env::EnvVars;
use std::path::{Path, PathBuf};

/// A sentence-transformers model memloop knows by name: where it lives on the Hugging Face Hub
/// and the prompts it expects when its own files declare none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct KnownModel {
    /// The short name (`multilingual-e5-small`).
    pub name: &'static str,
    /// The Hub repository (`intfloat/multilingual-e5-small`).
    pub repo: &'static str,
    /// Values per vector.
    pub dimension: usize,
    /// What it reads: `"~100 languages"` or `"English"`.
    pub languages: &'static str,
    /// About how much it downloads, in MB.
    pub download_mb: u32,
    /// Put before each query when the model directory declares no prompts.
    pub query_prompt: &'static str,
    /// Put before each memory when the model directory declares no prompts.
    pub passage_prompt: &'static str,
}

/// The models memloop knows, in the order it prefers them when several are in the cache:
/// multilingual ones first (a question in one language finds a memory written in another).
pub const KNOWN_MODELS: &[KnownModel] = &[
    KnownModel {
        name: "multilingual-e5-small",
        repo: "intfloat/multilingual-e5-small",
        dimension: 384,
        languages: "~100 languages",
        download_mb: 470,
        query_prompt: "query: ",
        passage_prompt: "passage: ",
    },
    KnownModel {
        name: "multilingual-e5-base",
        repo: "intfloat/multilingual-e5-base",
        dimension: 768,
        languages: "~100 languages",
        download_mb: 1110,
        query_prompt: "query: ",
        passage_prompt: "passage: ",
    },
    KnownModel {
        name: "multilingual-e5-large",
        repo: "intfloat/multilingual-e5-large",
        dimension: 1024,
        languages: "~100 languages",
        download_mb: 2240,
        query_prompt: "query: ",
        passage_prompt: "passage: ",
    },
    KnownModel {
        name: "paraphrase-multilingual-MiniLM-L12-v2",
        repo: "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
        dimension: 384,
        languages: "50+ languages",
        download_mb: 470,
        query_prompt: "",
        passage_prompt: "",
    },
    KnownModel {
        name: "paraphrase-multilingual-mpnet-base-v2",
        repo: "sentence-transformers/paraphrase-multilingual-mpnet-base-v2",
        dimension: 768,
        languages: "50+ languages",
        download_mb: 1110,
        query_prompt: "",
        passage_prompt: "",
    },
    KnownModel {
        name: "all-MiniLM-L6-v2",
        repo: "sentence-transformers/all-MiniLM-L6-v2",
        dimension: 384,
        languages: "English",
        download_mb: 90,
        query_prompt: "",
        passage_prompt: "",
    },
    KnownModel {
        name: "all-mpnet-base-v2",
        repo: "sentence-transformers/all-mpnet-base-v2",
        dimension: 768,
        languages: "English",
        download_mb: 420,
        query_prompt: "",
        passage_prompt: "",
    },
];

/// The known model called `name`: its short name or its Hub repository, in any case.
pub fn known_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name) || m.repo.eq_ignore_ascii_case(name))
}

impl KnownModel {
    /// The known model whose files `dir` holds: a Hugging Face cache snapshot of its
    /// repository, or a directory named after it (`…/multilingual-e5-small`).
    pub fn for_dir(dir: &Path) -> Option<&'static Self> {
        std::fs::canonicalize(dir)
            .ok()
            .and_then(|d| repo_of_snapshot(&d))
            .and_then(|repo| known_model(&repo))
            .or_else(|| {
                dir.file_name()
                    .and_then(|n| known_model(&n.to_string_lossy()))
            })
    }

    /// This model's embedder for directory `dir`, opened lazily ([`CandleEmbedder::open`]) with
    /// this model's prompts where the directory declares none.
    pub fn open(&self, dir: impl AsRef<Path>) -> CandleEmbedder {
        CandleEmbedder::open(dir).with_default_prompts(self.query_prompt, self.passage_prompt)
    }
}

/// The files a model directory needs, besides each module's `config.json`.
const REQUIRED: [&str; 4] = [
    "modules.json",
    "config.json",
    "tokenizer.json",
    "model.safetensors",
];

/// The local Hugging Face cache, laid out as `huggingface_hub` lays it out:
/// `models--<owner>--<name>/snapshots/<revision>/<files>`, `refs/main` naming the revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubCache {
    root: PathBuf,
}

impl HubCache {
    /// The cache at `root` (the `hub` directory itself).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The cache `huggingface_hub` uses, from `env`: `HF_HUB_CACHE`, else `$HF_HOME/hub`, else
    /// `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub` (`HOME`, or
    /// `USERPROFILE` on Windows). `None` without a home.
    pub fn from_env(env: &EnvVars) -> Option<Self> {
        let set = |name: &str| env.get(name).map(PathBuf::from);
        let root = set("HF_HUB_CACHE")
            .or_else(|| set("HF_HOME").map(|h| h.join("hub")))
            .or_else(|| set("XDG_CACHE_HOME").map(|c| c.join("huggingface/hub")))
            .or_else(|| {
                set("HOME")
                    .or_else(|| set("USERPROFILE"))
                    .map(|h| h.join(".cache/huggingface/hub"))
            })?;
        Some(Self::new(root))
    }

    /// The `hub` directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of Hub repository `repo` (`owner/name`) in the cache.
    fn repo_dir(&self, repo: &str) -> PathBuf {
        self.root
            .join(format!("models--{}", repo.replace('/', "--")))
    }

    /// The snapshot of `repo` that `refs/main` names, else the newest one, if it holds a whole
    /// model (modules.json, config.json, tokenizer.json, model.safetensors).
    pub fn snapshot(&self, repo: &str) -> Option<PathBuf> {
        let dir = self.repo_dir(repo);
        let complete = |p: &Path| REQUIRED.iter().all(|f| p.join(f).is_file());
        if let Ok(revision) = std::fs::read_to_string(dir.join("refs/main")) {
            let snapshot = dir.join("snapshots").join(revision.trim());
            if complete(&snapshot) {
                return Some(snapshot);
            }
        }
        let mut snapshots: Vec<(std::time::SystemTime, PathBuf)> =
            std::fs::read_dir(dir.join("snapshots"))
                .ok()?
                .flatten()
                .map(|e| e.path())
                .filter(|p| complete(p))
                .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
                .collect();
        snapshots.sort();
        snapshots.pop().map(|(_, p)| p)
    }

    /// The first of [`KNOWN_MODELS`] the cache holds whole, with its directory.
    pub fn first_known(&self) -> Option<(&'static KnownModel, PathBuf)> {
        KNOWN_MODELS
            .iter()
            .find_map(|m| self.snapshot(m.repo).map(|dir| (m, dir)))
    }
}

/// The Hub repository (`owner/name`) whose cached snapshot `dir` is, if it is one.
pub(crate) fn repo_of_snapshot(dir: &Path) -> Option<String> {
    let snapshots = dir.parent()?;
    if snapshots.file_name()? != "snapshots" {
        return None;
    }
    let repo = snapshots.parent()?.file_name()?.to_str()?;
    let rest = repo.strip_prefix("models--")?;
    let (owner, name) = rest.split_once("--")?;
    Some(format!("{owner}/{name}"))
}

/// The local model a host uses when it names none, and where it came from.
#[derive(Debug)]
#[non_exhaustive]
pub struct DefaultModel {
    /// The embedder, opened lazily ([`CandleEmbedder::open`]): its weights load on first use.
    pub embedder: CandleEmbedder,
    /// The model's name (a known model's short name, else the directory's name).
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Where it was found: `MEMLOOP_EMBED_MODEL` or `the Hugging Face cache`.
    pub source: &'static str,
}

/// The local embedding model configured or fetched, from `env`:
/// the directory `MEMLOOP_EMBED_MODEL` names, else the first of [`KNOWN_MODELS`] in the Hugging
/// Face cache ([`HubCache::from_env`]; `memloop models fetch` puts one there). `None` when there
/// is neither: recall stays lexical (BM25). A configured directory that is broken still gives a
/// model, whose calls fail with the reason (recall then degrades to BM25 and says why).
pub fn default_model(env: &EnvVars) -> Option<DefaultModel> {
    if let Some(dir) = env.get("MEMLOOP_EMBED_MODEL") {
        let dir = PathBuf::from(dir);
        let known = std::fs::canonicalize(&dir)
            .ok()
            .and_then(|d| repo_of_snapshot(&d))
            .and_then(|repo| known_model(&repo))
            .or_else(|| {
                dir.file_name()
                    .and_then(|n| known_model(&n.to_string_lossy()))
            });
        let embedder = match known {
            Some(model) => model.open(&dir),
            None => CandleEmbedder::open(&dir),
        };
        let name = known.map_or_else(
            || {
                dir.file_name()
                    .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into())
            },
            |m| m.name.to_owned(),
        );
        return Some(DefaultModel {
            embedder,
            name,
            dir,
            source: "MEMLOOP_EMBED_MODEL",
        });
    }
    let (model, dir) = HubCache::from_env(env)?.first_known()?;
    Some(DefaultModel {
        embedder: model.open(&dir),
        name: model.name.to_owned(),
        dir,
        source: "the Hugging Face cache",
    })
}

#[cfg(feature = "hub")]
pub use fetch::{FetchOptions, fetch};

#[cfg(feature = "hub")]
mod fetch {
    use super::{HubCache, REQUIRED};
    use memloop_core::embed::EmbedError;
    use std::path::PathBuf;

    /// Where and how [`fetch`] downloads.
    #[derive(Debug, Clone)]
    #[non_exhaustive]
    pub struct FetchOptions {
        /// The cache the files go to.
        pub cache: HubCache,
        /// The Hub's address (`HF_ENDPOINT`; default `https://huggingface.co`).
        pub endpoint: Option<String>,
        /// A Hub token (`HF_TOKEN`), for gated or private repositories.
        pub token: Option<String>,
        /// Show download progress bars on the terminal.
        pub progress: bool,
    }

    impl FetchOptions {
        /// Options from `env`: the cache of [`HubCache::from_env`], `HF_ENDPOINT`, `HF_TOKEN`;
        /// progress bars on. `None` without a cache directory.
        pub fn from_env(env: &memloop_host::env::EnvVars) -> Option<Self> {
            let set = |name: &str| env.get(name).map(str::to_owned);
            Some(Self {
                cache: HubCache::from_env(env)?,
                endpoint: set("HF_ENDPOINT"),
                token: set("HF_TOKEN"),
                progress: true,
            })
        }
    }

    /// Download the sentence-transformers model in Hub repository `repo` (`owner/name`) into
    /// the cache, as `huggingface_hub` would, and return its snapshot directory: modules.json,
    /// config.json, tokenizer.json, model.safetensors, each module's config.json, and
    /// sentence_bert_config.json and config_sentence_transformers.json where the repository
    /// has them. Files already in the cache are not downloaded again.
    ///
    /// # Errors
    ///
    /// [`EmbedError::Load`] naming the file and the reason (not found, no network, a server
    /// error, a repository that is not a sentence-transformers model).
    pub async fn fetch(repo: &str, options: &FetchOptions) -> Result<PathBuf, EmbedError> {
        use hf_hub::api::tokio::{ApiBuilder, ApiError};
        let mut builder = ApiBuilder::from_cache(hf_hub::Cache::new(options.cache.root().into()))
            .with_progress(options.progress)
            .with_token(options.token.clone());
        if let Some(endpoint) = &options.endpoint {
            builder = builder.with_endpoint(endpoint.trim_end_matches('/').to_owned());
        }
        let api = builder
            .build()
            .map_err(|e| EmbedError::Load(format!("cannot reach the Hub: {e}")))?;
        let hub = api.model(repo.to_owned());
        let failed = |file: &str, e: ApiError| EmbedError::Load(format!("{repo}/{file}: {e}"));
        let missing = |e: &ApiError| matches!(e, ApiError::RequestError(r) if r.status().map(|s| s.as_u16()) == Some(404));

        let modules = hub
            .get("modules.json")
            .await
            .map_err(|e| failed("modules.json", e))?;
        let modules: serde_json::Value = std::fs::read(&modules)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| {
                EmbedError::Load(format!(
                    "{repo}/modules.json is not JSON: not a sentence-transformers model"
                ))
            })?;
        let module_configs: Vec<String> = modules
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.get("path").and_then(serde_json::Value::as_str))
            .filter(|p| !p.is_empty() && !p.contains("..") && !p.starts_with('/'))
            .map(|p| format!("{p}/config.json"))
            .collect();
        let mut snapshot = None;
        for file in REQUIRED.iter().skip(1) {
            let path = hub.get(file).await.map_err(|e| failed(file, e))?;
            snapshot = path.parent().map(PathBuf::from);
        }
        for file in &module_configs {
            match hub.get(file).await {
                Ok(_) => {}
                // A Normalize module has no configuration.
                Err(e) if missing(&e) => {}
                Err(e) => return Err(failed(file, e)),
            }
        }
        for file in [
            "sentence_bert_config.json",
            "config_sentence_transformers.json",
        ] {
            match hub.get(file).await {
                Ok(_) => {}
                Err(e) if missing(&e) => {}
                Err(e) => return Err(failed(file, e)),
            }
        }
        snapshot.ok_or_else(|| EmbedError::Load(format!("{repo}: no snapshot directory")))
    }
}
