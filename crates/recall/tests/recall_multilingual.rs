//! Recall in many languages: memories in Chinese, Japanese, Korean, Russian, English, Thai,
//! Arabic and Greek, each found by a query in its own language (real sentences, not ASCII
//! stand-ins), through the BM25 and keyword selectors and the analyzer they share.

mod recall_common;

use memloop_recall::{Bm25Selector, KeywordSelector, SelectionContext, Selector};
use memloop_store::MemoryStore;
use memloop_text::{Analyzer, Script, normalize, tokens};
use recall_common::{put, store};
use std::sync::Arc;

/// (path, description, body) of one memory per language, plus distractors in the same languages.
const MEMORIES: &[(&str, &str, &str)] = &[
    (
        "zh-db.md",
        "主数据库的选择",
        "我们决定使用PostgreSQL作为主数据库，因为团队熟悉它的事务和扩展。",
    ),
    (
        "zh-deploy.md",
        "发布流程",
        "每周五下午不发布新版本，紧急修复需要两位同事审核。",
    ),
    (
        "ja-cache.md",
        "キャッシュの方針",
        "セッション情報はRedisにキャッシュし、有効期限は三十分とする。",
    ),
    (
        "ja-tests.md",
        "テストの書き方",
        "統合テストでは本物のデータベースを使い、モックは使わない。",
    ),
    (
        "ko-cache.md",
        "캐시 정책",
        "세션 캐시는 레디스에 저장하고 만료 시간은 삼십 분으로 정했다.",
    ),
    (
        "ko-review.md",
        "코드 리뷰 규칙",
        "모든 변경은 두 명의 리뷰어가 승인해야 병합할 수 있다.",
    ),
    (
        "ru-backup.md",
        "Резервные копии базы данных",
        "Резервное копирование базы выполняется каждую ночь в три часа.",
    ),
    (
        "ru-oncall.md",
        "Дежурства",
        "Дежурный инженер отвечает на инциденты в течение пятнадцати минут.",
    ),
    (
        "en-deploy.md",
        "Deploy freeze on Fridays",
        "We never ship releases on Friday afternoons; hotfixes need two reviewers.",
    ),
    (
        "en-style.md",
        "Code style",
        "Prefer small functions and early returns over nested conditionals.",
    ),
    (
        "th-meeting.md",
        "การประชุมประจำสัปดาห์",
        "ทีมประชุมทุกวันจันทร์เวลาสิบโมงเช้าเพื่อวางแผนงาน",
    ),
    (
        "ar-budget.md",
        "ميزانية المشروع",
        "تمت الموافقة على ميزانية الخوادم الجديدة للربع القادم",
    ),
    (
        "el-docs.md",
        "Τεκμηρίωση",
        "Η τεκμηρίωση του συστήματος γράφεται στα αγγλικά και στα ελληνικά.",
    ),
];

/// (query, the memory it must find first).
const QUERIES: &[(&str, &str)] = &[
    ("数据库", "zh-db.md"),
    ("我们用什么数据库？", "zh-db.md"),
    ("周五可以发布吗", "zh-deploy.md"),
    ("キャッシュの有効期限は？", "ja-cache.md"),
    ("データベースのテスト", "ja-tests.md"),
    ("캐시", "ko-cache.md"),
    ("캐시를 어디에 저장해?", "ko-cache.md"),
    ("리뷰어 승인", "ko-review.md"),
    ("резервное копирование базы данных", "ru-backup.md"),
    ("Кто дежурит по инцидентам?", "ru-oncall.md"),
    ("can we deploy on a friday?", "en-deploy.md"),
    ("nested conditionals", "en-style.md"),
    ("ประชุม", "th-meeting.md"),
    ("ميزانية الخوادم", "ar-budget.md"),
    ("τεκμηρίωση συστήματος", "el-docs.md"),
    // Full-width Latin in the query, normal in the memory (NFKC on both sides).
    ("ＰｏｓｔｇｒｅＳＱＬ", "zh-db.md"),
];

async fn filled() -> (tempfile::TempDir, Arc<dyn MemoryStore>) {
    let (tmp, store) = store();
    for (rel, description, body) in MEMORIES {
        put(&store, rel, description, body).await;
    }
    (tmp, store)
}

#[tokio::test]
async fn bm25_finds_each_language_by_a_query_in_that_language() {
    let (_tmp, store) = filled().await;
    let headers = store.scan().await.expect("scan");
    let sel: Arc<dyn Selector> = Arc::new(Bm25Selector::new(store.clone()));
    let ctx = SelectionContext::with_limit(3);
    for (query, want) in QUERIES {
        let got = sel
            .select_checked(query, &headers, &ctx)
            .await
            .expect("select");
        assert_eq!(
            got.first().map(String::as_str),
            Some(*want),
            "{query}: {got:?}"
        );
    }
}

#[tokio::test]
async fn keyword_matches_descriptions_in_each_language() {
    let (_tmp, store) = filled().await;
    let headers = store.scan().await.expect("scan");
    let sel: Arc<dyn Selector> = Arc::new(KeywordSelector::default());
    let ctx = SelectionContext::with_limit(3);
    for (query, want) in [
        ("主数据库是哪个", "zh-db.md"),
        ("キャッシュ", "ja-cache.md"),
        ("캐시는 어떻게 해?", "ko-cache.md"),
        ("копии базы", "ru-backup.md"),
        ("deploy freezes", "en-deploy.md"),
    ] {
        let got = sel
            .select_checked(query, &headers, &ctx)
            .await
            .expect("select");
        assert_eq!(
            got.first().map(String::as_str),
            Some(want),
            "{query}: {got:?}"
        );
    }
}

#[tokio::test]
async fn a_query_in_one_language_does_not_match_another() {
    let (_tmp, store) = filled().await;
    let headers = store.scan().await.expect("scan");
    let sel: Arc<dyn Selector> = Arc::new(Bm25Selector::new(store.clone()));
    let got = sel
        .select_checked("天气预报", &headers, &SelectionContext::with_limit(5))
        .await
        .expect("select");
    assert!(got.is_empty(), "no memory talks about the weather: {got:?}");
}

#[test]
fn tokens_split_scripts_and_normalise() {
    let t = tokens("我们决定使用PostgreSQL作为主数据库");
    assert_eq!(
        t,
        vec![
            ("我们决定使用".to_owned(), Script::Cjk),
            ("postgresql".to_owned(), Script::Latin),
            ("作为主数据库".to_owned(), Script::Cjk),
        ]
    );
    let t = tokens("캐시는 Данные v2 ﾃｽﾄ");
    assert_eq!(
        t,
        vec![
            ("캐시는".to_owned(), Script::Hangul),
            ("данные".to_owned(), Script::Cyrillic),
            ("v2".to_owned(), Script::Latin),
            ("テスト".to_owned(), Script::Cjk),
        ]
    );
    assert_eq!(normalize("Ｆｕｌｌ　ｗｉｄｔｈ ＡＢＣ"), "full width abc");
    // Devanagari vowel signs are combining marks: the word stays whole.
    assert_eq!(tokens("नमस्ते दुनिया").len(), 2);
}

#[test]
fn analyzer_rules_follow_the_script() {
    let a = Analyzer::new(false);
    // Chinese: character bigrams, no English stemming or stop words.
    assert_eq!(a.terms("主数据库"), vec!["主数", "数据", "据库"]);
    assert_eq!(a.terms("库"), vec!["库"]);
    // Korean: the word and its bigrams, so the particle does not hide the noun.
    let ko = a.terms("캐시는");
    assert!(ko.contains(&"캐시는".to_owned()) && ko.contains(&"캐시".to_owned()));
    assert_eq!(a.terms("캐시"), vec!["캐시"]);
    // Russian: Russian stop words and the Russian stemmer.
    assert_eq!(a.terms("в базе данных"), a.terms("базы данными"));
    // English: still stemmed, stop words dropped.
    assert_eq!(a.terms("The running tests"), vec!["run", "test"]);
    // Words of one script next to another script's word are not run together.
    assert_eq!(a.terms("用Redis缓存"), vec!["用", "redi", "缓存"]);
}
