//! HybridSelector and its on-disk vector cache, on a real memory dir: incremental updates, a
//! model change, torn and foreign cache files, the selector contract, paraphrase recall, and
//! the BM25 fallback (with its event) when the embedder fails, hangs or the turn is cancelled.
//!
//! The embedder here is a deterministic test double (a tiny concept lexicon), not a model: it
//! makes "what does she do for work" and "she is a nurse" land close without sharing a word.
//! The real embedders are tested in `memloop-candle` and against a loopback `/v1/embeddings`.

mod recall_common;

use memloop_core::embed::{Embedder, Prefixed};
use memloop_core::events::{AgentEvent, VecSink};
use memloop_recall::RecallEvent;
use memloop_recall::{
    Fusion, HybridConfig, HybridSelector, SelectionContext, Selector, SelectorError,
    vector_cache_for,
};
use memloop_store::MemoryStore;
use memloop_testkit::FakeEmbedder;
use recall_common::{put, store};
use std::sync::Arc;
use std::time::Duration;

/// Concepts and the words that express them.
const CONCEPTS: [&[&str]; 4] = [
    &[
        "work",
        "job",
        "nurse",
        "career",
        "hospital",
        "护士",
        "医院",
        "看護師",
        "工作",
        "работ",
        "وظيفة",
    ],
    &["pet", "dog", "cat", "puppy", "小狗", "宠物"],
    &["food", "pizza", "cooking", "dinner", "披萨", "晚饭"],
    &[
        "music",
        "guitar",
        "violin",
        "concert",
        "吉他",
        "音乐",
        "ギター",
    ],
];

/// The deterministic concept embedder over [`CONCEPTS`], under model id `id`: it counts and
/// keeps the texts it embeds, and can be made to fail or to take time (on tokio's clock).
fn concept_model(id: &str) -> FakeEmbedder {
    FakeEmbedder::concepts(&CONCEPTS).with_model_id(id)
}

async fn three(store: &Arc<dyn MemoryStore>) {
    put(
        store,
        "melanie-job.md",
        "Melanie is a nurse",
        "She works nights at the hospital.",
    )
    .await;
    put(
        store,
        "pets.md",
        "Caroline adopted a puppy",
        "A beagle called Max.",
    )
    .await;
    put(
        store,
        "dinner.md",
        "Friday is pizza night",
        "They cook pizza together.",
    )
    .await;
}

fn selector(
    store: &Arc<dyn MemoryStore>,
    embedder: Arc<FakeEmbedder>,
    config: HybridConfig,
) -> HybridSelector {
    let cache = vector_cache_for(&**store, embedder.model_id());
    HybridSelector::with_config(store.clone(), embedder, cache, config)
}

#[tokio::test]
async fn a_paraphrase_is_recalled_without_a_shared_word() {
    let (_tmp, store) = store();
    three(&store).await;
    let headers = store.scan().await.unwrap();
    let hybrid: Arc<dyn Selector> = Arc::new(selector(
        &store,
        Arc::new(concept_model("concepts-v1")),
        HybridConfig::default(),
    ));
    let got = hybrid
        .select_checked(
            "what does she do for work?",
            &headers,
            &SelectionContext::with_limit(1),
        )
        .await
        .unwrap();
    assert_eq!(got, vec!["melanie-job.md"]);
}

#[tokio::test]
async fn the_cache_is_incremental_across_sessions_and_edits() {
    let (_tmp, store) = store();
    three(&store).await;
    let headers = store.scan().await.unwrap();
    let first = Arc::new(concept_model("concepts-v1"));
    let report = selector(&store, first.clone(), HybridConfig::default())
        .warm(&headers)
        .await
        .unwrap();
    assert_eq!((report.embedded, report.pending), (3, 0));
    let cache = vector_cache_for(&*store, "concepts-v1");
    assert!(cache.is_file(), "{}", cache.display());

    // A new session: everything comes from the file.
    let second = Arc::new(concept_model("concepts-v1"));
    let again = selector(&store, second.clone(), HybridConfig::default());
    assert_eq!(again.embedded().await, 3);
    assert_eq!(again.warm(&headers).await.unwrap().embedded, 0);
    assert_eq!(second.embedded(), 0);

    // One memory edited, one rewritten with the same text (new mtime), one deleted.
    put(&store, "pets.md", "Caroline adopted a kitten", "A cat.").await;
    put(
        &store,
        "dinner.md",
        "Friday is pizza night",
        "They cook pizza together.",
    )
    .await;
    store.delete("melanie-job.md").await.unwrap();
    let headers = store.scan().await.unwrap();
    let report = again.warm(&headers).await.unwrap();
    assert_eq!(report.embedded, 1, "{report:?}");
    assert_eq!(report.removed, 1, "{report:?}");
    assert!(report.reused <= 1, "{report:?}");
    assert_eq!(second.embedded(), 1);
    assert_eq!(again.embedded().await, 2);
}

#[tokio::test]
async fn warming_reports_progress_batch_by_batch_up_to_what_needed_embedding() {
    let (_tmp, store) = store();
    three(&store).await;
    put(
        &store,
        "数据库.md",
        "主数据库是 PostgreSQL",
        "我们决定使用 PostgreSQL。",
    )
    .await;
    put(
        &store,
        "デプロイ.md",
        "デプロイは火曜日",
        "毎週火曜日にデプロイする。",
    )
    .await;
    let headers = store.scan().await.unwrap();
    let embedder = Arc::new(concept_model("concepts-progress").with_max_batch(2));
    let hybrid = selector(&store, embedder.clone(), HybridConfig::default());
    let seen = std::sync::Mutex::new(Vec::new());
    let report = hybrid
        .warm_with_progress(&headers, &|done, total| {
            seen.lock().unwrap().push((done, total))
        })
        .await
        .unwrap();
    assert_eq!(report.embedded, 5);
    // Once before the first batch, then after each batch of two: 2, 4, 5 of 5.
    assert_eq!(*seen.lock().unwrap(), [(0, 5), (2, 5), (4, 5), (5, 5)]);

    // A warm cache: only what changed counts toward the total.
    put(&store, "数据库.md", "主数据库是 MySQL", "我们改用 MySQL。").await;
    let headers = store.scan().await.unwrap();
    seen.lock().unwrap().clear();
    hybrid
        .warm_with_progress(&headers, &|done, total| {
            seen.lock().unwrap().push((done, total))
        })
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [(0, 1), (1, 1)]);
}

#[tokio::test]
async fn a_model_change_rebuilds_and_a_torn_or_foreign_file_is_discarded() {
    let (tmp, store) = store();
    three(&store).await;
    let headers = store.scan().await.unwrap();
    let path = tmp.path().join("vectors.bin");
    let open = |e: Arc<FakeEmbedder>| HybridSelector::new(store.clone(), e, path.clone());

    let v1 = Arc::new(concept_model("concepts-v1"));
    open(v1.clone()).warm(&headers).await.unwrap();
    let good = std::fs::read(&path).unwrap();

    // Same file, another model id: nothing is trusted.
    let v2 = Arc::new(concept_model("concepts-v2"));
    let s = open(v2.clone());
    assert_eq!(s.embedded().await, 0);
    assert_eq!(s.warm(&headers).await.unwrap().embedded, 3);

    // Torn (cut in half), foreign (not ours) and bit-flipped files: discarded, rebuilt.
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 1;
    for bad in [
        good[..good.len() / 2].to_vec(),
        b"{\"not\": \"a vector cache\"}".to_vec(),
        flipped,
        Vec::new(),
    ] {
        std::fs::write(&path, &bad).unwrap();
        let fresh = Arc::new(concept_model("concepts-v1"));
        let s = open(fresh.clone());
        assert_eq!(s.embedded().await, 0);
        assert_eq!(s.warm(&headers).await.unwrap().embedded, 3);
        assert_eq!(std::fs::read(&path).unwrap(), good, "rewritten whole");
    }
}

#[tokio::test]
async fn the_contract_holds_limit_and_already_surfaced() {
    let (_tmp, store) = store();
    three(&store).await;
    for i in 0..6 {
        put(&store, &format!("job-{i}.md"), "a job note", "career stuff").await;
    }
    let headers = store.scan().await.unwrap();
    let hybrid: Arc<dyn Selector> = Arc::new(selector(
        &store,
        Arc::new(concept_model("concepts-v1")),
        HybridConfig::default(),
    ));
    let ctx = SelectionContext {
        already_surfaced: ["melanie-job.md".to_owned()].into_iter().collect(),
        ..SelectionContext::with_limit(3)
    };
    let got = hybrid
        .select_checked("her job", &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    assert!(!got.contains(&"melanie-job.md".to_owned()));
    let unique: std::collections::HashSet<_> = got.iter().collect();
    assert_eq!(unique.len(), 3);
}

/// The memories of [`a_stray_shared_word_does_not_outrank_the_answer_in_another_language`]:
/// the answer to "what is her friend's job", a note that shares only a name and a year with the
/// foreign questions, and one about pets in general that shares no word with the English one.
async fn stray_word_memories(store: &Arc<dyn MemoryStore>) {
    put(
        store,
        "melanie-job.md",
        "Melanie is a nurse",
        "She works nights at the hospital.",
    )
    .await;
    put(
        store,
        "caroline-puppy.md",
        "Caroline adopted a puppy in 2021",
        "A beagle called Max. He steals pizza crusts after dinner.",
    )
    .await;
    put(
        store,
        "dog-park.md",
        "The dog park on Elm Street",
        "Every dog, cat and pet of the street meets there on Sundays.",
    )
    .await;
}

/// The selector weighs the two rankings by how much of the query the memories contain. A
/// question in another language that shares one stray word (a name, a year) with a wrong
/// memory, which BM25 therefore ranks first, gets the memory that answers it; a question in the
/// memories' language keeps the configured weights, so the memory that names what it asks
/// about beats one the embedder finds closer in general.
#[tokio::test]
async fn a_stray_shared_word_does_not_outrank_the_answer_in_another_language() {
    let (_tmp, store) = store();
    stray_word_memories(&store).await;
    let headers = store.scan().await.unwrap();
    let hybrid = selector(
        &store,
        Arc::new(concept_model("concepts-v1")),
        HybridConfig::default(),
    );
    let ctx = SelectionContext::with_limit(1);
    let lexical: Arc<dyn Selector> = hybrid.bm25();
    for question in [
        "Caroline的朋友是做什么工作的？",
        "Кем работает подруга Caroline?",
        "ما هي وظيفة صديقة Caroline؟",
        "Кем она работает с 2021 года?",
    ] {
        // BM25 alone: the stray word wins.
        let bm25 = lexical
            .select_checked(question, &headers, &ctx)
            .await
            .unwrap();
        assert_eq!(bm25, ["caroline-puppy.md"], "{question}");
        let coverage = hybrid.bm25().coverage(question).await;
        assert!(coverage < 0.5, "{question}: coverage {coverage}");
        let got = (&hybrid as &dyn Selector)
            .select_checked(question, &headers, &ctx)
            .await
            .unwrap();
        assert_eq!(got, ["melanie-job.md"], "{question}");
    }

    // In the memories' language every term is known: BM25's precise match keeps its weight.
    let question = "Caroline called her puppy what?";
    assert_eq!(hybrid.bm25().coverage(question).await, 1.0);
    let got = (&hybrid as &dyn Selector)
        .select_checked(question, &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, ["caroline-puppy.md"]);
    // The embedder alone prefers the note that is all about pets.
    let dense_only = selector(
        &store,
        Arc::new(concept_model("concepts-v1")),
        HybridConfig {
            fusion: Fusion::Weighted { dense_weight: 1.0 },
            ..HybridConfig::default()
        },
    );
    let got = (&dense_only as &dyn Selector)
        .select_checked(question, &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, ["dog-park.md"]);
}

#[tokio::test]
async fn a_failing_embedder_falls_back_to_bm25_with_an_event() {
    let (_tmp, store) = store();
    three(&store).await;
    let headers = store.scan().await.unwrap();
    let embedder = Arc::new(concept_model("concepts-v1"));
    embedder.fail(Some("the model fell over".into()));
    let hybrid: Arc<dyn Selector> = Arc::new(selector(&store, embedder, HybridConfig::default()));
    let sink = VecSink::default();
    let ctx = SelectionContext {
        events: Arc::new(sink.clone()),
        ..SelectionContext::with_limit(1)
    };
    let got = hybrid
        .select_checked("pizza night", &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, vec!["dinner.md"], "BM25 alone still answers");
    let events = sink.events();
    assert!(
        matches!(&events.iter().map(AgentEvent::extension).collect::<Vec<_>>()[..], [Some(RecallEvent::RecallDegraded { selector, reason })]
            if selector == "hybrid" && reason.contains("fell over")),
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hanging_embedder_times_out_into_bm25() {
    let (_tmp, store) = store();
    three(&store).await;
    let headers = store.scan().await.unwrap();
    let embedder = Arc::new(concept_model("slow").with_delay(Duration::from_secs(3600)));
    let hybrid: Arc<dyn Selector> = Arc::new(selector(&store, embedder, HybridConfig::default()));
    let sink = VecSink::default();
    let ctx = SelectionContext {
        events: Arc::new(sink.clone()),
        ..SelectionContext::with_limit(1)
    };
    let got = hybrid
        .select_checked("pizza", &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, vec!["dinner.md"]);
    assert!(
        matches!(&sink.events().iter().map(AgentEvent::extension).collect::<Vec<_>>()[..], [Some(RecallEvent::RecallDegraded { reason, .. })] if reason.contains("timed out")),
        "{:?}",
        sink.events()
    );
}

#[tokio::test(start_paused = true)]
async fn a_cold_index_fills_in_over_several_selections_within_the_budget() {
    let (_tmp, store) = store();
    three(&store).await;
    let headers = store.scan().await.unwrap();
    // One text per call, 1 s per call on the paused clock, a 2.5 s budget per selection: the
    // query takes 1 s, then at most two memories per selection.
    let embedder = Arc::new(
        concept_model("one-at-a-time")
            .with_delay(Duration::from_secs(1))
            .with_max_batch(1),
    );
    let config = HybridConfig {
        embed_budget: Duration::from_millis(2_500),
        ..HybridConfig::default()
    };
    let hybrid = Arc::new(selector(&store, embedder, config));
    let as_selector: Arc<dyn Selector> = hybrid.clone();
    let sink = VecSink::default();
    let ctx = SelectionContext {
        events: Arc::new(sink.clone()),
        ..SelectionContext::with_limit(1)
    };
    let mut progress = Vec::new();
    for _ in 0..3 {
        as_selector
            .select_checked("her job", &headers, &ctx)
            .await
            .unwrap();
        progress.push(hybrid.embedded().await);
    }
    assert!(progress[0] < 3, "{progress:?}");
    assert_eq!(*progress.last().unwrap(), 3, "{progress:?}");
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
    assert!(sink.events().is_empty(), "slowness is not a failure");
}

#[tokio::test]
async fn a_cancelled_turn_cancels_the_selection() {
    let (_tmp, store) = store();
    three(&store).await;
    let headers = store.scan().await.unwrap();
    let hybrid: Arc<dyn Selector> = Arc::new(selector(
        &store,
        Arc::new(concept_model("slow").with_delay(Duration::from_secs(3600))),
        HybridConfig::default(),
    ));
    let ctx = SelectionContext::with_limit(1);
    ctx.cancel.cancel();
    let err = hybrid
        .select_checked("pizza", &headers, &ctx)
        .await
        .unwrap_err();
    assert!(matches!(err, SelectorError::Cancelled), "{err:?}");
}

#[tokio::test]
async fn a_query_unrelated_to_every_memory_surfaces_nothing() {
    let (_tmp, store) = store();
    three(&store).await;
    let headers = store.scan().await.unwrap();
    let hybrid: Arc<dyn Selector> = Arc::new(selector(
        &store,
        Arc::new(concept_model("concepts-v1")),
        HybridConfig::default(),
    ));
    let got = hybrid
        .select_checked(
            "thanks, that helps!",
            &headers,
            &SelectionContext::with_limit(5),
        )
        .await
        .unwrap();
    assert!(got.is_empty(), "{got:?}");
    // Without the floor the least unrelated memories would fill the slots.
    let floorless: Arc<dyn Selector> = Arc::new(selector(
        &store,
        Arc::new(concept_model("concepts-v1")),
        HybridConfig {
            min_similarity: -1.0,
            ..HybridConfig::default()
        },
    ));
    let got = floorless
        .select_checked(
            "thanks, that helps!",
            &headers,
            &SelectionContext::with_limit(5),
        )
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
}

#[tokio::test]
async fn one_passage_of_a_long_memory_is_enough_to_recall_it() {
    let (_tmp, store) = store();
    // A long diary in Chinese, one topic per sentence (each sentence a passage of its own);
    // the guitar comes up once.
    let diary = [
        "我在市中心的那家大医院当护士，到今年已经整整工作了七年，每天晚上的夜班都让我觉得非常疲惫不堪，但我依然很喜欢这份工作。",
        "我们家的小狗叫豆豆，它是我们三年前从城郊的宠物收容所领养回来的，它特别喜欢在院子里追着蝴蝶和麻雀跑来跑去。",
        "周末我们常常在家里一起动手做晚饭，孩子们最喜欢的是我自己用烤箱烤出来的那种薄底的意大利披萨，每次都吃得干干净净。",
        "最近我开始跟着一位已经退休的老师学习古典吉他，每天晚上下班回到家以后都会认真练习一个小时，希望明年能上台演出。",
    ]
    .concat();
    put(&store, "diary.md", "我的生活", &diary).await;
    put(
        &store,
        "outing.md",
        "They went to a concert",
        "And had dinner after it.",
    )
    .await;
    let headers = store.scan().await.unwrap();
    let ctx = SelectionContext::with_limit(1);
    let query = "Does she play the guitar?";

    let embedder = Arc::new(concept_model("concepts-v1"));
    let hybrid = selector(&store, embedder.clone(), HybridConfig::default());
    hybrid.warm(&headers).await.unwrap();
    // The outing, the diary's whole text and each of its four passages.
    assert_eq!(embedder.embedded(), 6);
    let got = (&hybrid as &dyn Selector)
        .select_checked(query, &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, ["diary.md"]);

    // The passages' vectors come back from the cache file: nothing is embedded again.
    let again = Arc::new(concept_model("concepts-v1"));
    let reopened = selector(&store, again.clone(), HybridConfig::default());
    reopened.warm(&headers).await.unwrap();
    let got = (&reopened as &dyn Selector)
        .select_checked(query, &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, ["diary.md"]);
    assert_eq!(again.embedded(), 1, "only the query");

    // The diary's whole text alone says too many other things: the outing wins.
    let whole_only = selector(
        &store,
        Arc::new(concept_model("concepts-whole")),
        HybridConfig {
            passages: false,
            ..HybridConfig::default()
        },
    );
    let got = (&whole_only as &dyn Selector)
        .select_checked(query, &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, ["outing.md"]);
}

#[tokio::test]
async fn a_sessions_summary_lifts_its_notes_in_the_dense_ranking() {
    let (_tmp, store) = store();
    put(
        &store,
        "session-1/summary.md",
        "They talked about music",
        "Mostly about the guitar.",
    )
    .await;
    put(
        &store,
        "session-1/note.md",
        "She bought a violin",
        "Right after dinner at the hospital.",
    )
    .await;
    put(
        &store,
        "session-2/note.md",
        "A concert of guitar music",
        "With dinner after it.",
    )
    .await;
    let headers = store.scan().await.unwrap();
    // The summaries are not what the host wants back; dense ranking only.
    let ctx = SelectionContext {
        already_surfaced: ["session-1/summary.md".to_owned()].into(),
        ..SelectionContext::with_limit(1)
    };
    let config = |lift: f32| HybridConfig {
        fusion: Fusion::Weighted { dense_weight: 1.0 },
        dense_dir_weight: lift,
        ..HybridConfig::default()
    };
    let query = "what music did she make";
    let plain = selector(&store, Arc::new(concept_model("concepts-v1")), config(0.0));
    let got = (&plain as &dyn Selector)
        .select_checked(query, &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, ["session-2/note.md"]);
    let lifted = selector(&store, Arc::new(concept_model("concepts-v1")), config(0.5));
    let got = (&lifted as &dyn Selector)
        .select_checked(query, &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(
        got,
        ["session-1/note.md"],
        "the summary lifts its session's note"
    );
}

/// A memory file as another writer (an editor, `git checkout`) would leave it.
fn write_outside(
    dir: &std::path::Path,
    rel: &str,
    description: &str,
    body: &str,
) -> std::io::Result<()> {
    let text = format!(
        "---\nname: {description}\ndescription: {description}\ntype: project\n---\n\n{body}\n"
    );
    std::fs::write(dir.join(rel), text)
}

/// The vector cache follows the store's change feed: an edit, a delete and a rename made
/// outside memloop are each seen by the very next selection, and a selection with no change
/// embeds only the query. The queries share no word (no Han bigram) with the memories they
/// must find, so only a current vector can find them.
#[tokio::test]
async fn outside_edits_deletes_and_renames_reach_the_vectors_by_the_next_selection() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memory");
    std::fs::create_dir_all(&dir).unwrap();
    write_outside(&dir, "m1.md", "她的职业", "她是一名护士，上夜班。").unwrap();
    write_outside(&dir, "m2.md", "家里的动物", "我们养了一只小狗。").unwrap();
    write_outside(&dir, "m3.md", "周五", "周五晚上一起做披萨。").unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(memloop_files::FileMemoryStore::open(&dir).unwrap());
    let embedder = Arc::new(concept_model("concepts-feed"));
    // Dense ranking only: BM25 scores carry no weight.
    let config = HybridConfig {
        fusion: memloop_recall::Fusion::Weighted { dense_weight: 1.0 },
        ..HybridConfig::default()
    };
    let hybrid = Arc::new(selector(&store, embedder.clone(), config));
    let as_selector: Arc<dyn Selector> = hybrid.clone();
    let select = |query: &'static str| {
        let store = store.clone();
        let sel = as_selector.clone();
        async move {
            let headers = store.scan().await.unwrap();
            sel.select_checked(query, &headers, &SelectionContext::with_limit(1))
                .await
                .unwrap()
        }
    };
    assert_eq!(select("在医院工作的人").await, vec!["m1.md"]);
    assert!(
        select("音乐").await.is_empty(),
        "no memory is about music yet"
    );
    assert_eq!(hybrid.embedded().await, 3);

    // No change: only the query is embedded.
    let before = embedder.embedded();
    assert_eq!(select("在医院工作的人").await, vec!["m1.md"]);
    assert_eq!(embedder.embedded(), before + 1);

    // Edited outside: the dog became a guitar.
    write_outside(&dir, "m2.md", "家里的乐器", "她每天晚上弹吉他。").unwrap();
    assert_eq!(select("音乐").await, vec!["m2.md"]);

    // Renamed outside: the nurse's memory moves; the new path carries the vector.
    std::fs::rename(dir.join("m1.md"), dir.join("职业.md")).unwrap();
    assert_eq!(select("在医院工作的人").await, vec!["职业.md"]);
    assert_eq!(hybrid.embedded().await, 3);

    // Deleted outside: its vector goes.
    std::fs::remove_file(dir.join("m3.md")).unwrap();
    assert_eq!(
        hybrid.embedded().await,
        3,
        "nothing happens before a selection"
    );
    assert!(select("披萨").await.iter().all(|p| p != "m3.md"));
    assert_eq!(hybrid.embedded().await, 2);
}

#[tokio::test]
async fn an_asymmetric_model_embeds_the_query_and_the_memories_each_with_its_prefix() {
    let (_tmp, store) = store();
    put(&store, "护士.md", "梅兰妮是护士", "她在医院上夜班。").await;
    put(&store, "宠物.md", "卡罗琳养了一只小狗", "小狗叫豆豆。").await;
    let headers = store.scan().await.unwrap();
    let concepts = Arc::new(concept_model("concepts-v1"));
    let e5: Arc<dyn Embedder> = Arc::new(Prefixed::e5(concepts.clone()));
    let cache = vector_cache_for(&*store, e5.model_id());
    let hybrid: Arc<dyn Selector> = Arc::new(HybridSelector::new(store.clone(), e5, cache));
    let got = hybrid
        .select_checked(
            "她在哪里上班？医院",
            &headers,
            &SelectionContext::with_limit(1),
        )
        .await
        .unwrap();
    assert_eq!(got, vec!["护士.md"]);
    let seen = concepts.seen();
    let queries: Vec<&String> = seen.iter().filter(|t| t.starts_with("query: ")).collect();
    assert_eq!(queries.len(), 1, "{seen:?}");
    assert!(queries[0].contains("她在哪里上班"), "{seen:?}");
    // Every memory text (whole and passages) went in as a passage.
    let passages = seen.iter().filter(|t| t.starts_with("passage: ")).count();
    assert_eq!(passages, seen.len() - 1, "{seen:?}");
    assert!(seen.iter().any(|t| t.contains("梅兰妮是护士")));
}
