//! `PgFtsSelector` against the machine's PostgreSQL, through the selector contract.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::PgFtsSelector;
use memloop_recall::{SelectionContext, Selector};
use memloop_store::{MemoryDoc, MemoryHeader, MemoryStore, WriteMode};
use std::sync::Arc;
use support::{TestSchema, admin};

#[tokio::test]
async fn full_text_selector_ranks_and_obeys_the_contract() {
    let schema = TestSchema::new();
    let store = schema.open("p").await;
    let other = schema.open("other").await;
    let mems = [
        (
            "deploy.md",
            "Deploy windows",
            "when production deploys happen",
            "Deploys run on Tuesdays after the freeze.",
        ),
        (
            "testing.md",
            "Testing",
            "integration tests hit a real database",
            "Never mock the database in integration tests.",
        ),
        (
            "style.md",
            "Code style",
            "formatting rules",
            "Run rustfmt before committing.",
        ),
        (
            "db.md",
            "Database",
            "postgres setup",
            "The staging database is rebuilt nightly.",
        ),
    ];
    support::write_memories(&store, &mems).await;
    other
        .write(
            "leak.md",
            &MemoryDoc::new("Deploy", "deploys deploys", None, "deploying"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    let headers = store.scan().await.unwrap();
    let selector: Arc<dyn Selector> = Arc::new(PgFtsSelector::new(store.clone()));

    let got = selector
        .select_checked(
            "how do we deploy to production?",
            &headers,
            &SelectionContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(got.first().map(String::as_str), Some("deploy.md"));
    assert!(
        !got.contains(&"leak.md".to_owned()),
        "another project's row surfaced"
    );

    // Name matches outrank body matches (weights A > C).
    let got = selector
        .select_checked("database", &headers, &SelectionContext::default())
        .await
        .unwrap();
    assert_eq!(got, vec!["db.md".to_owned(), "testing.md".to_owned()]);

    // Already surfaced memories are skipped and the limit holds.
    let mut ctx = SelectionContext::with_limit(1);
    ctx.already_surfaced.insert("db.md".into());
    let got = selector
        .select_checked("database", &headers, &ctx)
        .await
        .unwrap();
    assert_eq!(got, vec!["testing.md".to_owned()]);

    // No usable words: nothing.
    assert!(
        selector
            .select_checked("?!", &headers, &SelectionContext::default())
            .await
            .unwrap()
            .is_empty()
    );

    // Cancelled turn: a typed error.
    let ctx = SelectionContext::default();
    ctx.cancel.cancel();
    assert!(selector.select("deploy", &headers, &ctx).await.is_err());
}

#[tokio::test]
async fn finds_chinese_japanese_korean_russian_and_english_memories() {
    let schema = TestSchema::new();
    let store = schema.open("multilingual").await;
    let mems = [
        (
            "zh-db.md",
            "主数据库",
            "数据库的选择",
            "我们决定使用PostgreSQL作为主数据库，因为团队熟悉它的事务和扩展。",
        ),
        (
            "zh-deploy.md",
            "发布流程",
            "什么时候发布",
            "每周五下午不发布新版本，紧急修复需要两位同事审核。",
        ),
        (
            "ja-cache.md",
            "キャッシュ",
            "キャッシュの方針",
            "セッション情報はRedisにキャッシュし、有効期限は三十分とする。",
        ),
        (
            "ko-cache.md",
            "캐시 정책",
            "세션 캐시는 레디스에 저장한다",
            "만료 시간은 삼십 분으로 정했다.",
        ),
        (
            "ru-backup.md",
            "Резервные копии",
            "Резервное копирование базы данных",
            "Копирование выполняется каждую ночь в три часа.",
        ),
        (
            "en-deploy.md",
            "Deploy freeze",
            "no releases on Fridays",
            "We never ship releases on Friday afternoons.",
        ),
    ];
    support::write_memories(&store, &mems).await;
    let headers = store.scan().await.unwrap();
    let selector: Arc<dyn Selector> = Arc::new(PgFtsSelector::new(store.clone()));
    let cases = [
        ("数据库", "zh-db.md"),
        ("我们用什么数据库？", "zh-db.md"),
        ("キャッシュの有効期限", "ja-cache.md"),
        ("캐시를", "ko-cache.md"),
        ("копии базы данных", "ru-backup.md"),
        ("shipping a release on friday", "en-deploy.md"),
        ("ＰｏｓｔｇｒｅＳＱＬ", "zh-db.md"),
    ];
    first_hits(selector.as_ref(), &headers, &cases).await;
    let got = selector
        .select_checked("天气预报", &headers, &SelectionContext::with_limit(3))
        .await
        .unwrap();
    assert!(got.is_empty(), "{got:?}");
}

/// Typed with or without accents, a query finds the memory written the other way (migration 5
/// folds the column, `fold_accents` the query). Before, `zurich` missed `Zürich`.
#[tokio::test]
async fn queries_find_memories_with_or_without_accents() {
    let schema = TestSchema::new();
    let store = schema.open("accents").await;
    let mems = [
        (
            "es-almacen.md",
            "Almacén de datos",
            "dónde viven los datos",
            "El almacén principal está en Sevilla.",
        ),
        (
            "tr-toplanti.md",
            "Çarşamba toplantısı",
            "haftalık toplantı",
            "Çarşamba günleri saat onda toplanıyoruz.",
        ),
        (
            "vi-db.md",
            "Máy chủ cơ sở dữ liệu",
            "cấu hình máy chủ",
            "Máy chủ cơ sở dữ liệu chạy trên cổng 5433.",
        ),
        (
            "de-office.md",
            "Büro in Zürich",
            "Standort des Teams",
            "Das Team arbeitet im Büro in Zürich.",
        ),
        (
            "ru-tree.md",
            "Ёлка в офисе",
            "новогодняя ёлка",
            "Ёлку ставим в офисе двадцатого декабря.",
        ),
        (
            "fr-reunion.md",
            "Reunion a Geneve",
            "reunion trimestrielle",
            "La reunion trimestrielle se tient a Geneve.",
        ),
    ];
    support::write_memories(&store, &mems).await;
    let headers = store.scan().await.unwrap();
    let selector: Arc<dyn Selector> = Arc::new(PgFtsSelector::new(store.clone()));
    let cases = [
        ("almacen principal", "es-almacen.md"),
        ("almacén principal", "es-almacen.md"),
        ("carsamba toplantisi", "tr-toplanti.md"),
        ("may chu co so du lieu", "vi-db.md"),
        ("máy chủ", "vi-db.md"),
        ("buro zurich", "de-office.md"),
        ("елка в офисе", "ru-tree.md"),
        ("ёлка", "ru-tree.md"),
        // The other way round: accents in the query, none in the memory.
        ("réunion à Genève", "fr-reunion.md"),
    ];
    first_hits(selector.as_ref(), &headers, &cases).await;

    // The SQL fold and the query's fold agree, word for word, in many languages; letters that
    // do not decompose and the marks of other scripts stay. Both see text as the index does:
    // NFKC (`memloop_words`), and lowercase (`to_tsvector` lowercases; query tokens are).
    let client = admin().await;
    for word in [
        "zürich",
        "ZÜRICH",
        "almacén",
        "çarşamba",
        "toplantısı",
        "dữ",
        "liệu",
        "réunion",
        "ёлка",
        "Ёлка",
        "йогурт",
        "łódź",
        "søknad",
        "straße",
        "đường",
        "nghiệm",
        "ångström",
        "adatbázisból",
        "naïve",
        "नमस्ते",
        "数据库",
        "캐시",
        "ﬁle",
    ] {
        let sql: String = client
            .query_one(
                &format!(
                    "SELECT lower({}.memloop_fold(normalize($1, NFKC)))",
                    schema.name
                ),
                &[&word],
            )
            .await
            .unwrap()
            .get(0);
        let token = memloop_text::normalize(word);
        assert_eq!(sql, memloop_text::fold_accents(&token), "{word}");
    }
}

/// Each `(query, memory)`: the memory is the first of the selector's (at most three) picks.
async fn first_hits(selector: &dyn Selector, headers: &[MemoryHeader], cases: &[(&str, &str)]) {
    for &(query, want) in cases {
        let got = selector
            .select_checked(query, headers, &SelectionContext::with_limit(3))
            .await
            .unwrap();
        assert_eq!(
            got.first().map(String::as_str),
            Some(want),
            "{query}: {got:?}"
        );
    }
}
