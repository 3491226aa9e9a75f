//! CandleEmbedder against sentence-transformers' own vectors for all-MiniLM-L6-v2 (BERT) and
//! all-mpnet-base-v2 (MPNet).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use memloop_candle::CandleEmbedder;
use memloop_core::embed::Embedder;
use support::{Reference, cosine, minilm_dir, mpnet_dir, references, references_in};

fn load() -> Option<CandleEmbedder> {
    Some(CandleEmbedder::load(minilm_dir()?).unwrap())
}

#[tokio::test]
async fn vectors_match_sentence_transformers() {
    let Some(embedder) = load() else { return };
    let refs = references();
    // The fixture covers what could go wrong: a paraphrase pair, texts longer than the
    // tokenizer.json's own 128-token truncation and longer than max_seq_length (256), non-ASCII
    // text and the empty string.
    assert!(
        refs.iter()
            .any(|r| r.word_pieces > 128 && r.word_pieces <= 256)
    );
    assert!(refs.iter().any(|r| r.word_pieces > 256));
    assert!(refs.iter().any(|r| r.text.is_empty()));
    assert!(refs.iter().any(|r| !r.text.is_ascii()));

    let vectors = matched(&embedder, &refs, 384).await;
    // The paraphrase pair is closer than the question and an unrelated statement.
    assert!(cosine(&vectors[0], &vectors[1]) > cosine(&vectors[0], &vectors[3]) + 0.3);
}

#[tokio::test]
async fn mpnet_vectors_match_sentence_transformers() {
    // MPNet: relative position buckets on the attention scores, positions numbered after the
    // padding id, no token types, max_seq_length 384.
    let Some(dir) = mpnet_dir() else { return };
    let embedder = CandleEmbedder::load(dir).unwrap();
    assert_eq!(embedder.dimension(), 768);
    let refs = references_in("mpnet_reference.json", 384);
    assert!(refs.iter().any(|r| r.word_pieces > 384));
    assert!(
        refs.iter()
            .any(|r| r.word_pieces > 128 && r.word_pieces <= 384)
    );
    let vectors = matched(&embedder, &refs, 768).await;
    // One by one, the same vectors.
    for (r, v) in refs.iter().zip(&vectors) {
        let single = embedder.embed(std::slice::from_ref(&r.text)).await.unwrap();
        assert!(cosine(&single[0], v) >= 0.99999, "{:?}", r.text);
    }
}

/// The fixture's texts embedded in one call, each vector checked against sentence-transformers'
/// (`dimension` values, cosine ≥ 0.99999, unit length).
async fn matched(embedder: &CandleEmbedder, refs: &[Reference], dimension: usize) -> Vec<Vec<f32>> {
    let texts: Vec<String> = refs.iter().map(|r| r.text.clone()).collect();
    let vectors = embedder.embed(&texts).await.unwrap();
    assert_eq!(vectors.len(), refs.len());
    for (r, v) in refs.iter().zip(&vectors) {
        assert_eq!(v.len(), dimension);
        let cos = cosine(v, &r.vector);
        eprintln!(
            "cosine {cos:.7} ({} word pieces) {:?}",
            r.word_pieces,
            truncate(&r.text)
        );
        assert!(cos >= 0.99999, "cosine {cos} for {:?}", r.text);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
    vectors
}

fn truncate(text: &str) -> String {
    text.chars().take(40).collect()
}

#[tokio::test]
async fn batched_vectors_equal_one_by_one() {
    let Some(embedder) = load() else { return };
    let texts: Vec<String> = references().into_iter().map(|r| r.text).collect();
    let batched = embedder.embed(&texts).await.unwrap();
    for (text, b) in texts.iter().zip(&batched) {
        let single = embedder.embed(std::slice::from_ref(text)).await.unwrap();
        let max_diff = single[0]
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(
            max_diff < 1e-5,
            "padding changed {:?} by {max_diff}",
            truncate(text)
        );
    }
}

#[tokio::test]
async fn more_than_a_batch_keeps_order() {
    let Some(embedder) = load() else { return };
    assert_eq!(embedder.max_batch(), 32);
    let texts: Vec<String> = (0..70)
        .map(|i| format!("memory number {i} about deploys"))
        .collect();
    // Straight to `embed` (which chunks internally) and through the trait's `embed_checked`.
    let direct = embedder.embed(&texts).await.unwrap();
    let dyn_embedder: &dyn Embedder = &embedder;
    let checked = dyn_embedder.embed_checked(&texts).await.unwrap();
    assert_eq!(direct.len(), 70);
    for (i, (a, b)) in direct.iter().zip(&checked).enumerate() {
        assert!(cosine(a, b) > 0.99999, "text {i}");
    }
    let alone = embedder.embed(&texts[69..]).await.unwrap();
    assert!(cosine(&alone[0], &direct[69]) > 0.99999);
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
}

#[tokio::test]
async fn model_id_is_stable_and_names_the_directory() {
    let Some(dir) = minilm_dir() else { return };
    let a = CandleEmbedder::load(&dir).unwrap();
    let b = CandleEmbedder::load(&dir).unwrap();
    assert_eq!(a.model_id(), b.model_id());
    let name = std::fs::canonicalize(&dir).unwrap();
    let name = name.file_name().unwrap().to_string_lossy();
    let id = a.model_id();
    assert!(id.starts_with(&format!("candle:{name}:")), "{id}");
    assert_eq!(id.len(), format!("candle:{name}:").len() + 16, "{id}");
    assert_eq!(a.dimension(), 384);
}

#[tokio::test(flavor = "current_thread")]
async fn inference_runs_off_the_runtime_thread() {
    let Some(embedder) = load() else { return };
    // Were the model run inside `poll`, the first poll would finish the work and be ready.
    // It is pending: tokenisation and inference happen on tokio's blocking pool.
    let texts = vec!["a sentence to embed".to_owned(); 8];
    let mut fut = embedder.embed(&texts);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(fut.await.unwrap().len(), 8);
}
