//! Models by name: the Hugging Face cache as `huggingface_hub` lays it out, the default model,
//! a broken model directory, and (feature `hub`) fetching a model from a loopback server in the
//! Hub's URL shape.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use memloop_candle::{CandleEmbedder, HubCache, default_model, known_model};
use memloop_core::embed::{EmbedError, Embedder, dot};
use memloop_host::env::EnvVars;
use std::path::{Path, PathBuf};
use support::{E5_ENV, model_dir};

/// An environment of `pairs`, as the library reads one.
fn env(pairs: &[(&str, &str)]) -> EnvVars {
    EnvVars::from_pairs(pairs.iter().copied())
}

/// A snapshot of `repo` at `revision` in the cache at `root`, its files linked from `model`
/// (or empty files when `model` is `None`), `refs/main` naming it.
fn cache_snapshot(root: &Path, repo: &str, revision: &str, model: Option<&Path>) -> PathBuf {
    let repo_dir = root.join(format!("models--{}", repo.replace('/', "--")));
    let snapshot = repo_dir.join("snapshots").join(revision);
    match model {
        Some(model) => {
            std::fs::create_dir_all(snapshot.parent().unwrap()).unwrap();
            let copy = support::copy_model(model);
            copy_tree(copy.path(), &snapshot);
        }
        None => {
            std::fs::create_dir_all(&snapshot).unwrap();
            for f in [
                "modules.json",
                "config.json",
                "tokenizer.json",
                "model.safetensors",
            ] {
                std::fs::write(snapshot.join(f), b"").unwrap();
            }
        }
    }
    std::fs::create_dir_all(repo_dir.join("refs")).unwrap();
    std::fs::write(repo_dir.join("refs/main"), revision).unwrap();
    snapshot
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap().flatten() {
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        if from.is_dir() {
            copy_tree(&from, &to);
        } else if from.is_symlink() {
            #[cfg(unix)]
            std::os::unix::fs::symlink(std::fs::read_link(&from).unwrap(), &to).unwrap();
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
    }
}

#[test]
fn the_cache_is_found_where_huggingface_hub_puts_it() {
    let cache =
        |pairs: &[(&str, &str)]| HubCache::from_env(&env(pairs)).map(|c| c.root().to_path_buf());
    assert_eq!(
        cache(&[("HF_HUB_CACHE", "/a"), ("HF_HOME", "/b")]),
        Some("/a".into())
    );
    assert_eq!(
        cache(&[("HF_HOME", "/b"), ("HOME", "/h")]),
        Some("/b/hub".into())
    );
    assert_eq!(
        cache(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]),
        Some("/x/huggingface/hub".into())
    );
    assert_eq!(
        cache(&[("HOME", "/h")]),
        Some("/h/.cache/huggingface/hub".into())
    );
    assert_eq!(
        cache(&[("HF_HOME", ""), ("HOME", "/h")]),
        Some("/h/.cache/huggingface/hub".into())
    );
    assert_eq!(cache(&[]), None);
}

#[test]
fn the_default_model_is_the_configured_one_else_the_first_known_in_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("hub");
    let hub = root.to_str().unwrap();
    // Nothing configured, nothing cached: no model, recall stays lexical.
    assert!(default_model(&env(&[("HF_HUB_CACHE", hub)])).is_none());

    // An English model cached: it is the default.
    cache_snapshot(&root, "sentence-transformers/all-MiniLM-L6-v2", "aaa", None);
    let found = default_model(&env(&[("HF_HUB_CACHE", hub)])).unwrap();
    assert_eq!(found.name, "all-MiniLM-L6-v2");
    assert_eq!(found.source, "the Hugging Face cache");
    assert!(found.dir.ends_with("snapshots/aaa"));

    // A multilingual model cached as well: preferred. A snapshot missing its weights is not a
    // model.
    let partial = cache_snapshot(&root, "intfloat/multilingual-e5-base", "bbb", None);
    std::fs::remove_file(partial.join("model.safetensors")).unwrap();
    assert_eq!(
        default_model(&env(&[("HF_HUB_CACHE", hub)])).unwrap().name,
        "all-MiniLM-L6-v2"
    );
    cache_snapshot(&root, "intfloat/multilingual-e5-small", "ccc", None);
    let found = default_model(&env(&[("HF_HUB_CACHE", hub)])).unwrap();
    assert_eq!(found.name, "multilingual-e5-small");
    assert_eq!(
        known_model("intfloat/multilingual-e5-small").unwrap().name,
        found.name
    );

    // MEMLOOP_EMBED_MODEL wins, even over a cached model.
    let configured = tmp.path().join("my-model");
    let found = default_model(&env(&[
        ("HF_HUB_CACHE", hub),
        ("MEMLOOP_EMBED_MODEL", configured.to_str().unwrap()),
    ]))
    .unwrap();
    assert_eq!(
        (found.name.as_str(), found.source),
        ("my-model", "MEMLOOP_EMBED_MODEL")
    );
}

#[tokio::test]
async fn a_broken_model_opens_and_every_call_says_why() {
    // Opening never fails (a host sets recall up at once); the first use reports the reason,
    // and so does every later one.
    let tmp = tempfile::tempdir().unwrap();
    let missing = CandleEmbedder::open(tmp.path().join("nowhere"));
    assert!(
        missing.model_id().ends_with(":unavailable"),
        "{}",
        missing.model_id()
    );
    for _ in 0..2 {
        let err = missing.embed(&["hello".to_owned()]).await.unwrap_err();
        assert!(
            matches!(&err, EmbedError::Load(why) if why.contains("modules.json")),
            "{err}"
        );
    }
    // Empty files where a model should be: the configuration is named.
    let root = tmp.path().join("hub");
    let empty = cache_snapshot(&root, "intfloat/multilingual-e5-small", "ccc", None);
    let err = CandleEmbedder::open(&empty)
        .embed_queries(&["x".to_owned()])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("modules.json"), "{err}");
}

#[tokio::test]
async fn a_known_model_without_prompts_gets_its_own() {
    // multilingual-e5-small as the Hub had it before sentence-transformers' prompts: without
    // config_sentence_transformers.json. Opened as the known model, it still embeds queries as
    // "query: ..." and memories as "passage: ...".
    let Some(e5) = model_dir(E5_ENV) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let snapshot = cache_snapshot(
        tmp.path(),
        "intfloat/multilingual-e5-small",
        "ddd",
        Some(&e5),
    );
    std::fs::remove_file(snapshot.join("config_sentence_transformers.json")).unwrap();
    let hub = tmp.path().to_str().unwrap();
    let found = default_model(&env(&[("HF_HUB_CACHE", hub)])).unwrap();
    let reference = CandleEmbedder::load(&e5).unwrap();
    let text = ["我们决定使用 PostgreSQL 作为主数据库。".to_owned()];
    let (a, b) = (
        found.embedder.embed_queries(&text).await.unwrap(),
        reference.embed_queries(&text).await.unwrap(),
    );
    assert!(dot(&a[0], &b[0]) > 0.99999);
    let (a, b) = (
        found.embedder.embed(&text).await.unwrap(),
        reference.embed(&text).await.unwrap(),
    );
    assert!(dot(&a[0], &b[0]) > 0.99999);
    // The prompts are part of the model id: vectors cached without them are not reused.
    let bare = CandleEmbedder::open(&snapshot);
    assert_ne!(bare.model_id(), found.embedder.model_id());
    assert!(
        found
            .embedder
            .model_id()
            .starts_with("candle:multilingual-e5-small:")
    );
}

#[cfg(feature = "hub")]
mod fetch {
    use super::*;
    use memloop_candle::{FetchOptions, fetch};
    use memloop_testkit::hub_server;

    fn options(cache: &Path, endpoint: &str) -> FetchOptions {
        let mut options = FetchOptions::from_env(&env(&[
            ("HF_HUB_CACHE", cache.to_str().unwrap()),
            ("HF_ENDPOINT", endpoint),
        ]))
        .unwrap();
        options.progress = false;
        options
    }

    #[tokio::test]
    async fn a_model_is_fetched_into_the_cache_and_found_there() {
        let Some(e5) = model_dir(E5_ENV) else { return };
        let repo = "intfloat/multilingual-e5-small";
        // The converted fixture served as the Hub serves the real model.
        let (url, seen) = hub_server(repo, e5.clone(), &[]).await.unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("hub");
        let options = options(&cache, &url);
        assert_eq!(options.endpoint.as_deref(), Some(url.as_str()));

        let dir = fetch(repo, &options).await.unwrap();
        assert!(dir.starts_with(&cache), "{}", dir.display());
        for file in [
            "modules.json",
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "1_Pooling/config.json",
            "sentence_bert_config.json",
            "config_sentence_transformers.json",
        ] {
            assert!(dir.join(file).is_file(), "{file} was not fetched");
        }
        // 2_Normalize has no config.json: a 404 there is not an error.
        assert!(
            seen.lock()
                .unwrap()
                .iter()
                .any(|p| p.ends_with("2_Normalize/config.json"))
        );

        // The cache now holds it, where the default-model lookup finds it.
        let found = default_model(&env(&[("HF_HUB_CACHE", cache.to_str().unwrap())])).unwrap();
        assert_eq!(found.name, "multilingual-e5-small");
        assert_eq!(
            std::fs::canonicalize(&found.dir).unwrap(),
            std::fs::canonicalize(&dir).unwrap()
        );
        let text = ["Деплой только по вторникам.".to_owned()];
        let fetched = found.embedder.embed(&text).await.unwrap();
        let original = CandleEmbedder::load(&e5)
            .unwrap()
            .embed(&text)
            .await
            .unwrap();
        assert!(dot(&fetched[0], &original[0]) > 0.99999);

        // A second fetch downloads nothing again.
        let before = seen.lock().unwrap().len();
        fetch(repo, &options).await.unwrap();
        let again: Vec<String> = seen.lock().unwrap()[before..].to_vec();
        assert!(
            !again.iter().any(|p| p.ends_with("model.safetensors")),
            "{again:?}"
        );
    }

    #[tokio::test]
    async fn a_missing_repository_or_a_failing_server_is_a_clear_error() {
        let Some(e5) = model_dir(E5_ENV) else { return };
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("hub");
        let (url, _) = hub_server(
            "intfloat/multilingual-e5-small",
            e5.clone(),
            &["tokenizer.json"],
        )
        .await
        .unwrap();
        let options = options(&cache, &url);
        let err = fetch("nobody/nothing", &options)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("nobody/nothing/modules.json") && err.contains("404"),
            "{err}"
        );
        let err = fetch("intfloat/multilingual-e5-small", &options)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tokenizer.json") && err.contains("500"),
            "{err}"
        );
        // Nothing half-fetched is taken for a model.
        assert!(default_model(&env(&[("HF_HUB_CACHE", cache.to_str().unwrap())])).is_none());
        // No server at all (a fresh cache: nothing to take from it).
        let closed = options_for_closed_port(&tmp.path().join("other")).await;
        let err = fetch("intfloat/multilingual-e5-small", &closed)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("modules.json"), "{err}");
    }

    async fn options_for_closed_port(cache: &Path) -> FetchOptions {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        options(cache, &url)
    }
}
