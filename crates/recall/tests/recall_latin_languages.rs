//! Recall in Latin-script languages other than English: Spanish, Portuguese, German, French and
//! Italian memories found by queries in their language that use other inflections of the same
//! words (plural and singular, other verb forms), with each memory's language detected; the
//! same queries analysed as English (the detector bypassed) miss them. Stop words of one
//! language never remove a content word of another, and mixed text (an English name in a German
//! sentence) still meets.

#![allow(clippy::expect_used)] // test helpers outside #[test] fns

mod recall_common;

use memloop_recall::{
    Bm25Params, Bm25Selector, KeywordConfig, KeywordSelector, Language, SelectionContext, Selector,
};
use memloop_store::MemoryStore;
use memloop_text::{Analyzer, detect_language};
use recall_common::{put, store};
use std::sync::Arc;

/// (path, language, description, body): two memories per language, so each query has a
/// distractor in its own language, plus English ones.
const MEMORIES: &[(&str, Language, &str, &str)] = &[
    (
        "migraciones.md",
        Language::Spanish,
        "Migraciones de la base de datos",
        "Las migraciones se ejecutan automáticamente antes de cada despliegue y los desarrolladores revisan los scripts.",
    ),
    (
        "vacaciones.md",
        Language::Spanish,
        "Vacaciones del equipo",
        "Durante agosto la mitad del equipo está de vacaciones y las guardias se reparten entre los demás.",
    ),
    (
        "senhas.md",
        Language::Portuguese,
        "Senhas dos usuários",
        "As senhas ficam guardadas no cofre de segredos e são trocadas a cada noventa dias pelos administradores.",
    ),
    (
        "reunioes.md",
        Language::Portuguese,
        "Reuniões semanais",
        "As reuniões de planejamento acontecem às segundas-feiras e duram no máximo uma hora.",
    ),
    (
        "datenbanken.md",
        Language::German,
        "Sicherung der Datenbanken",
        "Die Datenbanken werden jede Nacht gesichert und die Sicherungen dreißig Tage aufbewahrt.",
    ),
    (
        "urlaub.md",
        Language::German,
        "Urlaubsplanung",
        "Urlaubsanträge müssen zwei Wochen vorher beim Teamleiter eingereicht werden.",
    ),
    (
        "donnees.md",
        Language::French,
        "Bases de données de production",
        "Les bases de données de production sont répliquées sur deux serveurs et surveillées en permanence.",
    ),
    (
        "recrutement.md",
        Language::French,
        "Recrutement",
        "Les entretiens techniques se déroulent en deux étapes avec un exercice pratique.",
    ),
    (
        "chiavi.md",
        Language::Italian,
        "Rotazione delle chiavi",
        "Le chiavi di cifratura vengono ruotate ogni mese e i certificati scaduti sono rinnovati dal gruppo di sicurezza.",
    ),
    (
        "riunioni.md",
        Language::Italian,
        "Riunioni del venerdì",
        "Il venerdì pomeriggio facciamo una breve riunione per discutere i problemi della settimana.",
    ),
    (
        "garden.md",
        Language::English,
        "Office plants",
        "The tomato plants by the window will die without water over the holidays.",
    ),
    (
        "deploy.md",
        Language::English,
        "Deploy freeze on Fridays",
        "We never ship releases on Friday afternoons; hotfixes need two reviewers.",
    ),
    (
        "hauptdatenbank.md",
        Language::German,
        "Verbindungen zur Hauptdatenbank",
        "Wir nutzen PostgreSQL als Hauptdatenbank; der Connection Pool wird beim Start des Dienstes konfiguriert.",
    ),
    (
        "zhushujuku.md",
        Language::English,
        "主数据库的选择",
        "我们决定使用PostgreSQL作为主数据库，因为团队熟悉它的事务和扩展。",
    ),
];

/// (query, the memory it must find first). Every query word that names the topic is another
/// inflection of the memory's word, one that the English stemmer does not bring together.
const QUERIES: &[(&str, &str)] = &[
    ("¿Quién ejecutó la migración?", "migraciones.md"),
    ("Onde guardamos a senha trocada?", "senhas.md"),
    ("Wie wird eine Datenbank gesichert?", "datenbanken.md"),
    ("Où la donnée est-elle répliquée ?", "donnees.md"),
    ("Chi rinnova il certificato scaduto?", "chiavi.md"),
    // Mixed: the English words of a German memory, and its German compound inflected.
    ("connection pooling", "hauptdatenbank.md"),
    ("Hauptdatenbanken", "hauptdatenbank.md"),
    // Chinese with an English name, among memories in six Latin languages.
    ("我们用什么数据库？", "zhushujuku.md"),
    ("PostgreSQL 主数据库", "zhushujuku.md"),
];

async fn filled() -> (tempfile::TempDir, Arc<dyn MemoryStore>) {
    let (tmp, store) = store();
    for (rel, _, description, body) in MEMORIES {
        put(&store, rel, description, body).await;
    }
    (tmp, store)
}

async fn first(sel: &dyn Selector, store: &Arc<dyn MemoryStore>, query: &str) -> Vec<String> {
    let headers = store.scan().await.expect("scan");
    sel.select_checked(query, &headers, &SelectionContext::with_limit(3))
        .await
        .expect("select")
}

#[test]
fn each_memory_is_detected_in_its_language() {
    for (rel, lang, description, body) in MEMORIES {
        let text = format!("{description}\n{body}");
        let want = (*rel != "zhushujuku.md").then_some(*lang);
        assert_eq!(detect_language(&text), want, "{rel}");
    }
    // Chinese with one English name: too few Latin words to tell, so English.
    assert_eq!(detect_language("我们决定使用PostgreSQL作为主数据库"), None);
}

#[tokio::test]
async fn bm25_finds_each_language_by_another_inflection() {
    let (_tmp, store) = filled().await;
    let sel = Bm25Selector::new(store.clone());
    for (query, want) in QUERIES {
        let got = first(&sel, &store, query).await;
        assert_eq!(
            got.first().map(String::as_str),
            Some(*want),
            "{query}: {got:?}"
        );
    }
}

/// The inflections the queries above rely on: one stem in their language's stemmer, two under
/// the English one (which every Latin word got before: the detector bypassed).
#[test]
fn inflections_meet_in_their_language_only() {
    let a = Analyzer::new(false);
    // (language, query word, memory word, whether the English stemmer misses the pair: a
    // plural in -s it already joins).
    for (lang, query_word, memory_word, english_misses) in [
        (Language::Spanish, "ejecutó", "ejecutan", true),
        // English joins these only because accents fold before stemming (`migracion`).
        (Language::Spanish, "migración", "migraciones", false),
        (Language::Portuguese, "guardamos", "guardadas", true),
        (Language::Portuguese, "trocada", "trocadas", false),
        (Language::German, "Datenbank", "Datenbanken", true),
        (Language::German, "Hauptdatenbanken", "Hauptdatenbank", true),
        (Language::French, "donnée", "données", false),
        (Language::French, "répliquée", "répliquées", false),
        (Language::Italian, "rinnova", "rinnovati", true),
        (Language::Italian, "certificato", "certificati", true),
    ] {
        let q = a.terms_in(query_word, lang);
        assert_eq!(q, a.terms_in(memory_word, lang), "{lang}: {query_word}");
        assert!(!q.is_empty());
        if english_misses {
            assert_ne!(
                a.terms_in(query_word, Language::English),
                a.terms_in(memory_word, Language::English),
                "English already joins {query_word} and {memory_word}"
            );
        }
    }
}

/// The same index with the language fixed to English (the detector bypassed, as before this
/// analyzer knew other languages): the German plural no longer meets its singular.
#[tokio::test]
async fn the_english_override_loses_the_german_inflection() {
    let (_tmp, store) = filled().await;
    let detected = Bm25Selector::new(store.clone());
    let got = first(&detected, &store, "Datenbank").await;
    assert_eq!(got.first().map(String::as_str), Some("datenbanken.md"));
    let english = Bm25Params {
        language: Some(Language::English),
        ..Bm25Params::default()
    };
    let bypassed = Bm25Selector::with_params(store.clone(), english);
    let got = first(&bypassed, &store, "Datenbank").await;
    assert!(!got.contains(&"datenbanken.md".to_owned()), "{got:?}");
}

#[tokio::test]
async fn keyword_selector_meets_inflected_descriptions() {
    let (_tmp, store) = filled().await;
    let sel = KeywordSelector::new(KeywordConfig::default());
    for (query, want) in [
        ("migración de base de datos", "migraciones.md"),
        ("Sicherungen einer Datenbank", "datenbanken.md"),
        ("rotazioni della chiave", "chiavi.md"),
        ("recrutements", "recrutement.md"),
    ] {
        let got = first(&sel, &store, query).await;
        assert_eq!(
            got.first().map(String::as_str),
            Some(want),
            "{query}: {got:?}"
        );
    }
}

#[tokio::test]
async fn a_stop_word_of_one_language_is_a_content_word_of_another() {
    let (_tmp, store) = filled().await;
    let sel = Bm25Selector::new(store.clone());
    // "die" is an English verb and a German article: the English memory is found, the German
    // ones (full of the article) are not.
    let got = first(&sel, &store, "die").await;
    assert_eq!(got, vec!["garden.md".to_owned()]);

    let a = Analyzer::new(false);
    // Spanish and French function words leave a Spanish or French text, English ones stay in
    // words English does not know as function words.
    let es = a.terms("Las migraciones de la base de datos que el equipo revisa");
    for stop in ["las", "de", "la", "que", "el"] {
        assert!(!es.contains(&stop.to_owned()), "{stop} in {es:?}");
    }
    assert!(es.contains(&"migracion".to_owned()), "{es:?}");
    let fr = a.terms("Les bases de données sont répliquées sur deux serveurs");
    assert!(
        !fr.iter().any(|t| t == "les" || t == "de" || t == "sur"),
        "{fr:?}"
    );
    // The German article is a word of an English text.
    assert!(
        a.terms("the plants will die without water")
            .contains(&"die".to_owned())
    );
}

#[test]
fn the_override_fixes_the_language() {
    let de = Analyzer::new(false).with_language(Some(Language::German));
    assert_eq!(de.language_of("the plants will die"), Language::German);
    assert_eq!(de.terms("Datenbanken"), de.terms("Datenbank"));
    let auto = Analyzer::new(false);
    assert_eq!(
        auto.language_of("Die Datenbanken werden jede Nacht gesichert"),
        Language::German
    );
    // A single word is too little to tell: English.
    assert_eq!(auto.language_of("Datenbanken"), Language::English);
    assert_eq!("de".parse::<Language>(), Ok(Language::German));
    assert_eq!("Portuguese".parse::<Language>(), Ok(Language::Portuguese));
    assert!("klingon".parse::<Language>().is_err());
}

/// A query term meets a memory only through the memory's own language: the German stem of
/// `Datenbanken` (`datenbank`) does not reach an English memory that happens to contain
/// `Datenbank`, whose English analysis of the query (`datenbanken`) does not match it.
#[tokio::test]
async fn a_query_stem_counts_only_for_memories_of_its_language() {
    let (_tmp, store) = store();
    put(
        &store,
        "glossary.md",
        "Glossary of the team",
        "We still say Datenbank for the main database because the first admin was from Berlin.",
    )
    .await;
    put(
        &store,
        "sicherung.md",
        "Sicherung",
        "Die Datenbanken werden jede Nacht gesichert und dreißig Tage aufbewahrt.",
    )
    .await;
    let sel = Bm25Selector::new(store.clone());
    let got = first(&sel, &store, "Datenbanken").await;
    assert_eq!(got, vec!["sicherung.md".to_owned()]);
    // Spelled as the English memory has it, the word meets both.
    let got = first(&sel, &store, "Datenbank").await;
    assert_eq!(got.len(), 2, "{got:?}");
}

/// Queries typed without accents (a keyboard without them, a hurried user), or with `е` for
/// `ё`, find the memory written with them, first, with BM25 and with the keyword selector.
#[tokio::test]
async fn queries_without_accents_find_accented_memories() {
    let (_tmp, store) = filled().await;
    for (rel, description, body) in [
        (
            "toplanti.md",
            "Çarşamba toplantısı",
            "Haftalık planlama toplantısı her çarşamba İstanbul ofisinde yapılır.",
        ),
        (
            "may-chu.md",
            "Máy chủ cơ sở dữ liệu",
            "Máy chủ cơ sở dữ liệu được sao lưu mỗi đêm lúc hai giờ sáng.",
        ),
        (
            "yolka.md",
            "Новогодняя ёлка",
            "Ёлку в офисе ставят двадцатого декабря, игрушки лежат на складе.",
        ),
    ] {
        put(&store, rel, description, body).await;
    }
    // (query, memory, whether the query's words are in the memory's description, which is
    // all the keyword selector reads).
    let bm25 = Bm25Selector::new(store.clone());
    let keyword = KeywordSelector::new(KeywordConfig::default());
    for (query, want, in_description) in [
        (
            "Las migraciones se ejecutan automaticamente",
            "migraciones.md",
            false,
        ),
        ("reunioes semanais de planejamento", "reunioes.md", true),
        ("Urlaubsantrage beim Teamleiter", "urlaub.md", false),
        ("bases de donnees repliquees", "donnees.md", true),
        ("riunioni del venerdi", "riunioni.md", true),
        ("carsamba toplantisi", "toplanti.md", true),
        ("may chu co so du lieu", "may-chu.md", true),
        ("новогодняя елка", "yolka.md", true),
        ("когда ставят елку", "yolka.md", false),
    ] {
        let mut selectors: Vec<(&str, &dyn Selector)> = vec![("bm25", &bm25)];
        if in_description {
            selectors.push(("keyword", &keyword));
        }
        for (name, sel) in selectors {
            let got = first(sel, &store, query).await;
            assert_eq!(
                got.first().map(String::as_str),
                Some(want),
                "{name}: {query}: {got:?}"
            );
        }
    }
}
