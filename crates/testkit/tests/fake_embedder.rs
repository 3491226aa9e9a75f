//! `FakeEmbedder` gives the same vectors on every run and machine (pinned here), of the
//! dimension it says, and does what a test sets: fails, takes time on tokio's clock, holds its
//! queries at a gate, and records what it embedded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::embed::{EmbedError, Embedder, dot};
use memloop_testkit::{FakeEmbedder, Gate};
use std::sync::Arc;
use std::time::Duration;

fn texts(t: &[&str]) -> Vec<String> {
    t.iter().map(|s| (*s).to_owned()).collect()
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() < 1e-6
}

/// The buckets are FNV-1a of the lowercased word: pinned, so a cache keyed by these vectors or
/// a test asserting a similarity never changes under a new Rust release.
#[tokio::test]
async fn hashed_vectors_are_pinned_normalised_and_share_only_words() {
    let e = FakeEmbedder::hashed(8);
    assert_eq!((e.dimension(), e.model_id()), (8, "hashed-8"));
    // "deploy" falls in bucket 6, "on" and "tuesday" in bucket 0.
    let v = e.vector("Deploy on TUESDAY");
    let (one, two) = (1.0 / 5f32.sqrt(), 2.0 / 5f32.sqrt());
    let expected = [two, 0.0, 0.0, 0.0, 0.0, 0.0, one, 0.0];
    assert!(v.iter().zip(expected).all(|(a, b)| close(*a, b)), "{v:?}");

    let e = FakeEmbedder::hashed(256);
    let v = e
        .embed(&texts(&[
            "We deploy on Tuesdays",
            "tuesdays: we DEPLOY on",
            "我们周二部署",
            "部署",
            "Мы развёртываем по вторникам",
            "мы РАЗВЁРТЫВАЕМ",
            "Le déploiement, mardi",
            "",
        ]))
        .await
        .unwrap();
    for x in &v[..7] {
        assert!(close(dot(x, x), 1.0), "normalised: {x:?}");
    }
    assert!(
        close(dot(&v[0], &v[1]), 1.0),
        "the same words in any order and case"
    );
    // Chinese, written without spaces, shares its characters.
    assert!(dot(&v[2], &v[3]) > 0.5);
    assert!(dot(&v[4], &v[5]) > 0.5, "Cyrillic, lowercased");
    assert!(dot(&v[0], &v[6]) < 0.5);
    assert!(v[7].iter().all(|x| *x == 0.0), "no words, no vector");
    // The same on the next call, and on another embedder.
    let again = FakeEmbedder::hashed(256).vector("We deploy on Tuesdays");
    assert_eq!(again, v[0]);
}

const TABLE: memloop_testkit::ConceptTable =
    &[&["work", "nurse", "护士", "работ"], &["pet", "小狗"]];

/// A concept table puts texts about one concept close without a shared word, in every
/// language the table names; the last element is the constant 0.1.
#[tokio::test]
async fn concept_vectors_follow_the_table() {
    let e = FakeEmbedder::concepts(TABLE).with_model_id("concepts-v1");
    assert_eq!((e.dimension(), e.model_id()), (3, "concepts-v1"));
    let v = e.vector("She is a NURSE");
    let norm = (1.0f32 + 0.01).sqrt();
    assert!(
        close(v[0], 1.0 / norm) && v[1] == 0.0 && close(v[2], 0.1 / norm),
        "{v:?}"
    );
    let work = e.vector("what does she do for work");
    let zh = e.vector("她是护士");
    let ru = e.vector("Она работает медсестрой");
    let pet = e.vector("我的小狗");
    for other in [&work, &zh, &ru] {
        assert!(dot(&v, other) > 0.99, "{other:?}");
        assert!(dot(other, &pet) < 0.1, "{other:?}");
    }
    assert!(close(
        dot(&e.vector("nothing here"), &e.vector("nor here")),
        1.0
    ));
}

#[tokio::test]
async fn a_constant_embedder_gives_its_vector_to_every_text() {
    let e = FakeEmbedder::constant(vec![1.0, 0.0]).with_model_id("held-v1");
    assert_eq!((e.dimension(), e.model_id()), (2, "held-v1"));
    let v = e.embed(&texts(&["a", "б", "丙"])).await.unwrap();
    assert_eq!(v, vec![vec![1.0, 0.0]; 3]);
}

/// A failing embedder errs with its reason and counts nothing; switched back, it works.
#[tokio::test]
async fn failures_are_switchable_and_not_counted() {
    let e = FakeEmbedder::hashed(4).failing("connection refused");
    let err = e.embed(&texts(&["x"])).await.unwrap_err();
    assert!(
        matches!(&err, EmbedError::Inference(r) if r == "connection refused"),
        "{err}"
    );
    assert!(e.embed_queries(&texts(&["x"])).await.is_err());
    assert_eq!(e.embedded(), 0);
    e.fail(None);
    e.embed(&texts(&["première", "第二"])).await.unwrap();
    e.embed_queries(&texts(&["query: третий"])).await.unwrap();
    assert_eq!(e.embedded(), 3);
    assert_eq!(e.seen(), ["première", "第二", "query: третий"]);
    e.fail(Some("the model fell over".into()));
    assert!(e.embed(&texts(&["x"])).await.is_err());
    // Through the checked entry point: the vectors have the dimension it says.
    e.fail(None);
    let dynamic: Arc<dyn Embedder> = Arc::new(FakeEmbedder::hashed(4).with_max_batch(1));
    assert_eq!(dynamic.max_batch(), 1);
    let v = dynamic
        .embed_checked(&texts(&["a b", "c d", "e f"]))
        .await
        .unwrap();
    assert_eq!(v.len(), 3);
}

/// The delay is on tokio's clock: with the clock paused it is exact.
#[tokio::test(start_paused = true)]
async fn a_slow_embedder_takes_its_delay_per_call() {
    let e = FakeEmbedder::hashed(4).with_delay(Duration::from_secs(3600));
    let start = tokio::time::Instant::now();
    e.embed(&texts(&["a"])).await.unwrap();
    e.embed_queries(&texts(&["b"])).await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(7200));
}

/// Queries wait at the gate; the texts searched do not.
#[tokio::test(flavor = "current_thread")]
async fn held_queries_wait_until_released() {
    let gate = Arc::new(Gate::new());
    let e = Arc::new(FakeEmbedder::hashed(4).hold_queries(gate.clone()));
    e.embed(&texts(&["passage"])).await.unwrap();
    assert_eq!(gate.entered(), 0);
    let query = tokio::spawn({
        let e = e.clone();
        async move { e.embed_queries(&texts(&["query"])).await }
    });
    gate.wait_entered(1).await;
    assert_eq!(e.embedded(), 1, "held before it embedded");
    gate.release(1);
    query.await.unwrap().unwrap();
    assert_eq!(e.embedded(), 2);
}
