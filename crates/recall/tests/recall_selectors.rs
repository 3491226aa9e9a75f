//! Selectors: the shared contract check, keyword, BM25 (incremental, all memories), LLM side
//! query (scripted model) and the fallback combinator.

mod recall_common;

use memloop_core::model::{ModelError, ModelResponse};
use memloop_recall::{
    Bm25Selector, FallbackSelector, HeaderList, KeywordSelector, LlmSelector, SELECTOR_PURPOSE,
    SelectionContext, Selector, SelectorError,
};
use memloop_store::{MemoryHeader, ScanCache};
use memloop_testkit::{ScriptStep, ScriptedModel};
use recall_common::{put, store};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

fn header(rel: &str, description: &str) -> MemoryHeader {
    MemoryHeader {
        rel_path: rel.into(),
        name: None,
        description: Some(description.into()),
        memory_type: None,
        mtime: SystemTime::UNIX_EPOCH,
    }
}

/// A selector that returns whatever it was built with (a test double for the contract check).
struct Fixed(Vec<&'static str>);

#[async_trait::async_trait]
impl Selector for Fixed {
    async fn select(
        &self,
        _q: &str,
        _h: &[MemoryHeader],
        _c: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        Ok(self.0.iter().map(|s| s.to_string()).collect())
    }
}

/// A selector that always fails.
struct Broken;

#[async_trait::async_trait]
impl Selector for Broken {
    async fn select(
        &self,
        _q: &str,
        _h: &[MemoryHeader],
        _c: &SelectionContext,
    ) -> Result<Vec<String>, SelectorError> {
        Err(SelectorError::Other("index corrupt".into()))
    }
}

#[tokio::test]
async fn contract_drops_unknown_duplicate_surfaced_and_caps_the_limit() {
    let headers: Vec<_> = (0..8).map(|i| header(&format!("m{i}.md"), "x")).collect();
    let sel: Arc<dyn Selector> = Arc::new(Fixed(vec![
        "ghost.md", "m1.md", "m1.md", "m2.md", "../m3.md", "m3.md", "m4.md", "m5.md", "m6.md",
        "m7.md",
    ]));
    let mut ctx = SelectionContext::default();
    ctx.already_surfaced.insert("m2.md".into());
    let got = sel.select_checked("q", &headers, &ctx).await.unwrap();
    assert_eq!(got, vec!["m1.md", "m3.md", "m4.md", "m5.md", "m6.md"]);
    assert_eq!(SelectionContext::default().limit, 5);
    let zero = SelectionContext::with_limit(0);
    assert!(
        sel.select_checked("q", &headers, &zero)
            .await
            .unwrap()
            .is_empty()
    );
}

/// The same contract over the headers a `ScanCache` keeps (membership by hash lookup, not a
/// linear probe): unknown, escaping, duplicate and surfaced paths dropped, the limit kept.
#[tokio::test]
async fn contract_is_the_same_over_a_scan_cache() {
    let (_dir, store) = store();
    for name in [
        "部署.md",
        "тесты.md",
        "배포.md",
        "m3.md",
        "m4.md",
        "m5.md",
        "m6.md",
    ] {
        put(&store, name, "x", "body").await;
    }
    let cache = ScanCache::new(store.clone());
    let headers = cache.headers().await.unwrap();
    assert!(headers.contains_path("部署.md"));
    assert!(!headers.contains_path("ghost.md"));
    let sel: Arc<dyn Selector> = Arc::new(Fixed(vec![
        "ghost.md",
        "部署.md",
        "部署.md",
        "тесты.md",
        "../m3.md",
        "배포.md",
        "m3.md",
        "m4.md",
        "m5.md",
        "m6.md",
    ]));
    let mut ctx = SelectionContext::default();
    ctx.already_surfaced.insert("тесты.md".into());
    let got = sel.select_checked("q", &*headers, &ctx).await.unwrap();
    assert_eq!(got, vec!["部署.md", "배포.md", "m3.md", "m4.md", "m5.md"]);
    // The same through the `Arc` and through the plain slice.
    assert_eq!(sel.select_checked("q", &headers, &ctx).await.unwrap(), got);
    assert_eq!(
        sel.select_checked("q", headers.as_slice(), &ctx)
            .await
            .unwrap(),
        got
    );
}

#[tokio::test]
async fn keyword_matches_name_and_description_only() {
    let mut named = header("deploy.md", "shipping checklist");
    named.name = Some("Release process".into());
    let headers = vec![
        header("colours.md", "the UI palette"),
        named,
        header("db.md", "integration tests hit a real postgres database"),
    ];
    let sel: Arc<dyn Selector> = Arc::new(KeywordSelector::default());
    let ctx = SelectionContext::default();
    let got = sel
        .select_checked("how do we release?", &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, vec!["deploy.md"]);
    let got = sel
        .select_checked("Database tests", &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, vec!["db.md"]);
    assert!(
        sel.select_checked("weather", &headers, &ctx)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn bm25_searches_bodies_of_all_memories_beyond_the_newest_200() {
    let (_tmp, store) = store();
    put(
        &store,
        "old/flaky.md",
        "notes from march",
        "The payment webhook retries are flaky under load",
    )
    .await;
    for i in 0..230 {
        put(
            &store,
            &format!("filler/f{i:03}.md"),
            &format!("filler note {i}"),
            "nothing to see",
        )
        .await;
    }
    let headers = store.scan().await.unwrap();
    assert_eq!(headers.len(), 231);
    let pos = headers
        .iter()
        .position(|h| h.rel_path == "old/flaky.md")
        .unwrap();
    assert!(
        pos >= 200,
        "the target must be outside the newest 200 (at {pos})"
    );
    let bm25 = Bm25Selector::new(store.clone());
    let sel: Arc<dyn Selector> = Arc::new(bm25);
    let got = sel
        .select_checked(
            "why are webhook retries flaky?",
            &headers,
            &SelectionContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(got.first().map(String::as_str), Some("old/flaky.md"));
}

/// The index follows the whole store, but a caller may offer fewer candidates (the recall hook
/// leaves daily logs out; a benchmark ranks one conversation's summaries). Ranking considers only
/// what was offered: a better match outside the candidates must not take the only slot.
#[tokio::test]
async fn bm25_ranks_only_the_candidates_it_is_given() {
    let (_tmp, store) = store();
    put(
        &store,
        "decisions/数据库.md",
        "主数据库用 PostgreSQL",
        "我们决定使用 PostgreSQL。",
    )
    .await;
    put(
        &store,
        "logs/2026-11-25.md",
        "数据库迁移",
        "数据库迁移：今天完成数据库迁移，明天检查数据库迁移。",
    )
    .await;
    put(
        &store,
        "deploy.md",
        "deploys on Tuesdays",
        "We deploy on Tuesdays.",
    )
    .await;
    let all = store.scan().await.unwrap();
    let offered: Vec<MemoryHeader> = all
        .iter()
        .filter(|h| !h.rel_path.starts_with("logs/"))
        .cloned()
        .collect();
    let sel: Arc<dyn Selector> = Arc::new(Bm25Selector::new(store.clone()));
    let one = SelectionContext::with_limit(1);
    // Over everything the log wins (every query bigram, many times)...
    assert_eq!(
        sel.select_checked("数据库迁移", &all, &one).await.unwrap(),
        ["logs/2026-11-25.md"]
    );
    // ...but it was not offered: the best offered memory answers, not an empty list.
    assert_eq!(
        sel.select_checked("数据库迁移", &offered, &one)
            .await
            .unwrap(),
        ["decisions/数据库.md"]
    );
    // With every memory offered, nothing is filtered out.
    assert_eq!(
        sel.select_checked("deploy Tuesday", &all, &one)
            .await
            .unwrap(),
        ["deploy.md"]
    );
}

#[tokio::test]
async fn bm25_index_is_updated_incrementally() {
    let (_tmp, store) = store();
    put(&store, "a.md", "alpha", "apples grow on trees").await;
    put(&store, "b.md", "beta", "bananas are yellow").await;
    put(&store, "c.md", "gamma", "cherries are red").await;
    let bm25 = Bm25Selector::new(store.clone());
    let first = bm25.sync(&store.scan().await.unwrap()).await;
    assert_eq!((first.added, first.updated, first.removed), (3, 0, 0));
    let again = bm25.sync(&store.scan().await.unwrap()).await;
    assert_eq!(
        again,
        Default::default(),
        "nothing changed, nothing re-read"
    );

    // Change one file (ensure a different mtime), delete another.
    let before = store.scan().await.unwrap();
    let old = before.iter().find(|h| h.rel_path == "b.md").unwrap().mtime;
    put(&store, "b.md", "beta", "blueberries are blue").await;
    let path = store.describe().dir().unwrap().join("b.md");
    let newer = old + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(newer)
        .unwrap();
    store.delete("c.md").await.unwrap();
    let headers = store.scan().await.unwrap();
    let report = bm25.sync(&headers).await;
    assert_eq!((report.added, report.updated, report.removed), (0, 1, 1));
    assert_eq!(bm25.indexed().await, 2);

    let sel: Arc<dyn Selector> = Arc::new(bm25);
    let ctx = SelectionContext::default();
    assert_eq!(
        sel.select_checked("blue blueberries", &headers, &ctx)
            .await
            .unwrap(),
        vec!["b.md"]
    );
    assert!(
        sel.select_checked("bananas", &headers, &ctx)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        sel.select_checked("cherries", &headers, &ctx)
            .await
            .unwrap()
            .is_empty()
    );
}

fn llm(model: &ScriptedModel) -> Arc<dyn Selector> {
    Arc::new(LlmSelector::new(Arc::new(model.clone())))
}

fn three() -> Vec<MemoryHeader> {
    vec![
        header(
            "testing.md",
            "run integration tests against a real database",
        ),
        header("style.md", "prefer small functions"),
        header(
            "cargo-gotcha.md",
            "cargo test needs --all-features or the db tests are skipped",
        ),
    ]
}

#[tokio::test]
async fn llm_selector_sends_the_side_query_and_reads_well_formed_json() {
    let model = ScriptedModel::new();
    model.push_for(
        SELECTOR_PURPOSE,
        ScriptStep::text(r#"{"selected_memories": ["testing.md", "cargo-gotcha.md"]}"#),
    );
    let ctx = SelectionContext {
        recent_tools: vec!["cargo".into(), "grep".into()],
        ..SelectionContext::default()
    };
    let got = llm(&model)
        .select_checked("how do I run the tests?", &three(), &ctx)
        .await
        .unwrap();
    assert_eq!(got, vec!["testing.md", "cargo-gotcha.md"]);
    let req = &model.requests_for(SELECTOR_PURPOSE)[0];
    assert_eq!(req.max_tokens, 256);
    let schema = req.response_schema.as_ref().unwrap();
    assert_eq!(
        schema.schema["properties"]["selected_memories"]["type"],
        "array"
    );
    let user = req.last_user_text().unwrap();
    assert!(user.contains("how do I run the tests?"));
    assert!(user.contains("- testing.md (1970-01-01T00:00:00Z): run integration tests"));
    assert!(user.ends_with("Recently used tools: cargo, grep"));
    assert!(
        req.system[0].contains("warn"),
        "the tools rule is in the system prompt"
    );
}

#[tokio::test]
async fn llm_selector_manifest_holds_only_the_newest_200_and_no_tools_line_without_tools() {
    let headers: Vec<_> = (0..250)
        .map(|i| header(&format!("m{i:03}.md"), "d"))
        .collect();
    let model = ScriptedModel::new().on_purpose(SELECTOR_PURPOSE, |_| {
        Some(ScriptStep::text(r#"{"selected_memories": []}"#))
    });
    let got = llm(&model)
        .select_checked("anything at all", &headers, &SelectionContext::default())
        .await
        .unwrap();
    assert!(got.is_empty());
    let user = model.requests()[0].last_user_text().unwrap();
    assert!(user.contains("m199.md") && !user.contains("m200.md"));
    assert!(!user.contains("Recently used tools"));
}

#[tokio::test]
async fn llm_selector_survives_prose_fences_and_made_up_names() {
    let model = ScriptedModel::new()
        .then(ScriptStep::text("Here you go:\n```json\n{\"selected_memories\": [\"style\", \"nope.md\", \"./testing.md\"]}\n```\nThese fit."))
        .then(ScriptStep::text("I think {this} matters. {\"selected_memories\": [\"invented/one.md\"]} done"));
    let sel = llm(&model);
    let ctx = SelectionContext::default();
    assert_eq!(
        sel.select_checked("q q", &three(), &ctx).await.unwrap(),
        vec!["style.md", "testing.md"]
    );
    assert!(
        sel.select_checked("q q", &three(), &ctx)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn llm_selector_errors_are_typed() {
    let model = ScriptedModel::new()
        .then(ScriptStep::Fail(ModelError::Overloaded("busy".into())))
        .then(ScriptStep::text("I cannot decide."));
    let sel = llm(&model);
    let ctx = SelectionContext::default();
    let e = sel.select_checked("q q", &three(), &ctx).await.unwrap_err();
    assert!(
        matches!(e, SelectorError::Model(ModelError::Overloaded(_))),
        "{e}"
    );
    let e = sel.select_checked("q q", &three(), &ctx).await.unwrap_err();
    assert!(matches!(e, SelectorError::InvalidResponse(_)), "{e}");
}

#[tokio::test(start_paused = true)]
async fn slow_llm_times_out_and_the_fallback_answers() {
    let slow = ScriptStep::Delay(
        Duration::from_secs(30),
        Box::new(ScriptStep::Respond(ModelResponse::text(
            r#"{"selected_memories": ["style.md"]}"#,
        ))),
    );
    let model = ScriptedModel::new().then(slow.clone()).then(slow);
    let keyword: Arc<dyn Selector> = Arc::new(KeywordSelector::default());
    let both: Arc<dyn Selector> = Arc::new(FallbackSelector::new(
        llm(&model),
        keyword,
        Duration::from_secs(3),
    ));
    let started = tokio::time::Instant::now();
    let got = both
        .select_checked(
            "database integration",
            &three(),
            &SelectionContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(got, vec!["testing.md"]);
    assert_eq!(started.elapsed(), Duration::from_secs(3));

    // The LlmSelector's own timeout (10 s default) is typed too.
    let e = llm(&model)
        .select_checked("q q", &three(), &SelectionContext::default())
        .await
        .unwrap_err();
    assert!(matches!(e, SelectorError::Timeout(_)), "{e}");
}

#[tokio::test]
async fn fallback_takes_over_on_error_but_not_on_an_empty_answer_or_cancellation() {
    let keyword: Arc<dyn Selector> = Arc::new(KeywordSelector::default());
    let fb = FallbackSelector::new(Arc::new(Broken), keyword.clone(), Duration::from_secs(1));
    let got = (&fb as &dyn Selector)
        .select_checked(
            "prefer small functions",
            &three(),
            &SelectionContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(got, vec!["style.md"]);
    let fb = FallbackSelector::new(
        Arc::new(Fixed(vec![])),
        keyword.clone(),
        Duration::from_secs(1),
    );
    assert!(
        (&fb as &dyn Selector)
            .select_checked(
                "prefer small functions",
                &three(),
                &SelectionContext::default()
            )
            .await
            .unwrap()
            .is_empty()
    );

    let model = ScriptedModel::new().then(ScriptStep::Delay(
        Duration::from_secs(5),
        Box::new(ScriptStep::text("{}")),
    ));
    let fb = FallbackSelector::new(llm(&model), keyword, Duration::from_secs(60));
    let ctx = SelectionContext::default();
    ctx.cancel.cancel();
    let e = (&fb as &dyn Selector)
        .select_checked("prefer small functions", &three(), &ctx)
        .await
        .unwrap_err();
    assert!(matches!(e, SelectorError::Cancelled));
}

/// The LLM selector returns only paths of the manifest it was shown: a real memory beyond the
/// manifest cap, an already surfaced one and an invented one are all dropped by `select`
/// itself, not only by the shared contract check.
#[tokio::test]
async fn llm_selector_accepts_only_paths_from_the_manifest_it_was_shown() {
    let headers: Vec<_> = (0..250)
        .map(|i| header(&format!("m{i:03}.md"), "d"))
        .collect();
    let model = ScriptedModel::new().on_purpose(SELECTOR_PURPOSE, |_| {
        Some(ScriptStep::text(
            r#"{"selected_memories": ["m001.md", "m002.md", "m240.md", "ghost.md"]}"#,
        ))
    });
    let ctx = SelectionContext {
        already_surfaced: ["m002.md".to_owned()].into_iter().collect(),
        ..SelectionContext::default()
    };
    let got = llm(&model).select("q", &headers, &ctx).await.unwrap();
    assert_eq!(got, vec!["m001.md"]);
    let user = model.requests()[0].last_user_text().unwrap();
    assert!(!user.contains("m240.md") && !user.contains("m002.md"));
}

/// The BM25 index follows the store's change feed: an outside edit, a new file and a delete
/// reach the index on the next selection, and only those files are read, whatever headers
/// the caller passes (here: none at all), watching and polling alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bm25_follows_outside_changes_through_the_feed() {
    use memloop_files::{FileMemoryStore, StoreConfig};
    use memloop_store::MemoryStore;
    for watch in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let store: Arc<dyn MemoryStore> = Arc::new(
            FileMemoryStore::open(tmp.path())
                .unwrap()
                .with_config(StoreConfig {
                    watch,
                    ..StoreConfig::default()
                }),
        );
        put(&store, "a.md", "alpha", "apples grow on trees").await;
        put(&store, "b.md", "beta", "bananas are yellow").await;
        let bm25 = Bm25Selector::new(store.clone());
        let top = |q: &'static str| {
            let bm25 = &bm25;
            async move {
                bm25.scored(q, &[], 3, |_| true)
                    .await
                    .into_iter()
                    .map(|(p, _)| p)
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(top("apples").await, ["a.md"], "watch={watch}");
        assert_eq!(bm25.indexed().await, 2);
        let dir = store.describe().dir().unwrap().to_path_buf();
        // An editor rewrites a.md in place (Russian), another tool adds c.md (Japanese).
        std::fs::write(
            dir.join("a.md"),
            "---\nname: alpha\ndescription: заметка\n---\n\nкошка спит на диване\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("c.md"),
            "---\nname: gamma\ndescription: メモ\n---\n\n東京の天気は晴れです\n",
        )
        .unwrap();
        assert_eq!(top("кошка").await, ["a.md"], "watch={watch}");
        assert!(
            top("apples").await.is_empty(),
            "old text gone, watch={watch}"
        );
        assert_eq!(top("東京").await, ["c.md"], "watch={watch}");
        std::fs::remove_file(dir.join("b.md")).unwrap();
        assert!(top("bananas").await.is_empty(), "watch={watch}");
        assert_eq!(bm25.indexed().await, 2);
    }
}
