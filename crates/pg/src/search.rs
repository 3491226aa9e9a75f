//! The team search's query side: the query is cut by the recall analyzer
//! (`memloop_text::tokens`, the same normalisation and script rules as local recall)
//! into the two kinds of lexemes the `search_text` column (migration 2) holds: words, stemmed
//! by PostgreSQL's `russian` configuration (Snowball Russian for Cyrillic, Snowball English for
//! ASCII words, as local recall does), and character bigrams of Han, Kana, Hangul and Thai runs
//! (the `simple` configuration over `memloop_grams`), so Chinese and Japanese text is found
//! without a dictionary and a Korean particle does not hide its noun. Words are folded on both
//! sides (Latin letters without their accents, `ё` as `е`: migration 5 and
//! [`fold_accents`]), so `zurich` finds `Zürich` and `réunion` finds `reunion`.

use memloop_text::{Script, fold_accents, tokens};
use std::collections::BTreeSet;

/// The lexemes of one query: `words` for `to_tsquery('russian', ..)` and `grams` for
/// `to_tsquery('simple', ..)`, each already joined with ` | ` (any may match).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct QueryTerms {
    pub(crate) words: String,
    pub(crate) grams: String,
}

fn bigrams(run: &str, out: &mut BTreeSet<String>) {
    let chars: Vec<char> = run.chars().collect();
    if chars.len() == 1 {
        out.insert(run.to_owned());
    }
    for w in chars.windows(2) {
        out.insert(w.iter().collect());
    }
}

/// The query's lexemes; `None` when it has none. Tokens hold only letters, digits and combining
/// marks, so nothing in them is tsquery syntax.
pub(crate) fn query_terms(query: &str) -> Option<QueryTerms> {
    let mut words = BTreeSet::new();
    let mut grams = BTreeSet::new();
    for (token, script) in tokens(query) {
        match script {
            Script::Cjk | Script::Thai => bigrams(&token, &mut grams),
            Script::Hangul => {
                bigrams(&token, &mut grams);
                words.insert(token);
            }
            // One-letter words carry no topic (and are mostly stop words). The column holds
            // words folded (migration 5), so the query's are too.
            _ if token.chars().count() >= 2 => {
                words.insert(fold_accents(&token));
            }
            _ => {}
        }
    }
    let join = |s: BTreeSet<String>| s.into_iter().collect::<Vec<_>>().join(" | ");
    let terms = QueryTerms {
        words: join(words),
        grams: join(grams),
    };
    (terms != QueryTerms::default()).then_some(terms)
}

/// The search statement for `terms`: `$1` project, `$2` paths to exclude, `$3` limit, then the
/// non-empty term lists in order (words, grams).
pub(crate) fn search_sql(terms: &QueryTerms) -> String {
    let q = match (terms.words.is_empty(), terms.grams.is_empty()) {
        (false, false) => "to_tsquery('russian', $4) || to_tsquery('simple', $5)",
        (false, true) => "to_tsquery('russian', $4)",
        _ => "to_tsquery('simple', $4)",
    };
    format!(
        "SELECT rel_path, ts_rank(search_text, q) AS rank
         FROM memloop_memories, (SELECT {q} AS q) query
         WHERE project_id = $1 AND search_text @@ q AND NOT (rel_path = ANY($2))
         ORDER BY rank DESC, updated_at DESC LIMIT $3"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_grams_by_script() {
        let t = query_terms("我们用什么数据库? PostgreSQL 캐시는 базы").unwrap_or_default();
        assert_eq!(t.words, "postgresql | базы | 캐시는");
        assert!(t.grams.contains("数据 | ") && t.grams.contains("캐시"));
        assert_eq!(query_terms("? !"), None);
        assert_eq!(query_terms("库").map(|t| t.grams), Some("库".into()));
    }
}
