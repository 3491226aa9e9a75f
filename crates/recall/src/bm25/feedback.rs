//! Pseudo-relevance feedback for [`Bm25Postings`] (RM3-style): the best memories of a first pass
//! lend their most characteristic words to the query, weighted below the query's own words,
//! so that a question phrased differently from a memory still meets the words of memories
//! that share its topic.

use super::{Bm25Postings, QueryTerm, lang_bit};
use std::collections::HashMap;

impl Bm25Postings {
    /// Add the feedback words' scores (see [`Self::expand`]) to a first pass's `scores` over
    /// the `touched` slots; memories they reach for the first time join `touched`. The words
    /// score apart from the query so that the coordination factor (the share of the *user's*
    /// words a memory matched) applies to the first pass only, and a memory reached through
    /// feedback alone is not scaled to nothing.
    pub(super) fn add_feedback(
        &self,
        qterms: &[QueryTerm],
        scores: &mut [f32],
        touched: &mut Vec<u32>,
        keep: &dyn Fn(&str) -> bool,
        every: u16,
    ) {
        let words = self.expand(qterms, scores, touched, keep);
        if words.is_empty() {
            return;
        }
        let (extra, reached) = self.score(&words, every);
        let mut seen = vec![false; scores.len()];
        for d in touched.iter() {
            if let Some(s) = seen.get_mut(*d as usize) {
                *s = true;
            }
        }
        for d in reached {
            let i = d as usize;
            let (Some(score), Some(add)) = (scores.get_mut(i), extra.get(i)) else {
                continue;
            };
            *score += add;
            if !seen[i] {
                touched.push(d);
            }
        }
    }

    /// Up to [`Bm25Params::feedback_terms`](super::Bm25Params::feedback_terms)
    /// words of the best [`Bm25Params::feedback_docs`](super::Bm25Params::feedback_docs)
    /// memories `keep` accepts (given the first pass's `scores` over the `touched` slots), as
    /// query terms flagged `expansion`; none of them is a term of `qterms`.
    ///
    /// A word's relevance-model weight is Σ over feedback memories of (its frequency in the
    /// memory / the memory's length) × (the memory's share of the feedback memories' scores);
    /// words are picked by that weight times their IDF (a word every memory has says nothing) and
    /// added with `feedback_weight` × weight / heaviest weight. Bigrams and the query's own terms
    /// are never added; each added word scores only memories of its feedback memory's language.
    pub(super) fn expand(
        &self,
        qterms: &[QueryTerm],
        scores: &[f32],
        touched: &[u32],
        keep: &dyn Fn(&str) -> bool,
    ) -> Vec<QueryTerm> {
        let mut out = Vec::new();
        let params = &self.params;
        if params.feedback_terms == 0 || params.feedback_weight <= 0.0 {
            return out;
        }
        let mut top: Vec<(u32, f32)> = touched
            .iter()
            .map(|d| (*d, scores.get(*d as usize).copied().unwrap_or(0.0)))
            .filter(|(d, s)| *s > 0.0 && self.doc(*d).is_some_and(|doc| keep(&doc.path)))
            .collect();
        top.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        top.truncate(params.feedback_docs);
        let mass: f32 = top.iter().map(|(_, s)| s).sum();
        if mass <= 0.0 {
            return out;
        }
        // term id → (relevance-model weight, languages of the memories it came from)
        let mut model: HashMap<u32, (f32, u16)> = HashMap::new();
        for (d, score) in &top {
            let Some(doc) = self.doc(*d) else { continue };
            let len = doc.lens.iter().sum::<u32>().max(1) as f32;
            for tid in &doc.terms {
                let t = *tid as usize;
                if self.is_bigram.get(t).copied().unwrap_or(true)
                    || qterms.iter().any(|q| q.tid == *tid)
                {
                    continue;
                }
                let Some(posting) = self
                    .postings
                    .get(t)
                    .and_then(|list| list.iter().find(|p| p.doc == *d))
                else {
                    continue;
                };
                let tf: f32 = posting.tf.iter().map(|n| f32::from(*n)).sum();
                let e = model.entry(*tid).or_insert((0.0, 0));
                e.0 += tf / len * (score / mass);
                e.1 |= lang_bit(doc.lang);
            }
        }
        let mut ranked: Vec<(u32, f32, u16, f32)> = model
            .into_iter()
            .map(|(tid, (w, langs))| (tid, w, langs, w * self.idf(tid)))
            .filter(|(_, _, _, pick)| *pick > 0.0)
            .collect();
        ranked.sort_unstable_by(|a, b| b.3.total_cmp(&a.3).then(a.0.cmp(&b.0)));
        ranked.truncate(params.feedback_terms);
        let heaviest = ranked.iter().map(|r| r.1).fold(0f32, f32::max);
        if heaviest <= 0.0 {
            return out;
        }
        out.extend(ranked.into_iter().map(|(tid, w, langs, _)| QueryTerm {
            tid,
            langs,
            weight: params.feedback_weight * w / heaviest,
            expansion: true,
        }));
        out.sort_unstable_by_key(|q| q.tid);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Bm25Params, Bm25Postings, IndexText};
    use std::time::SystemTime;

    fn index(feedback_docs: usize, memories: &[(&str, &str)]) -> Bm25Postings {
        let mut idx = Bm25Postings::new(Bm25Params {
            feedback_docs,
            ..Bm25Params::default()
        });
        for (path, text) in memories {
            let t = IndexText {
                name: "",
                description: text,
                body: "",
            };
            idx.upsert(path, SystemTime::UNIX_EPOCH, t);
        }
        idx
    }

    fn found(idx: &Bm25Postings, query: &str) -> Vec<String> {
        idx.search(query, 10, |_| true)
            .into_iter()
            .map(|r| r.0)
            .collect()
    }

    /// The second memory shares no word with the query, only with the first pass's best memory:
    /// feedback reaches it, the plain query does not, and the best memory stays first.
    fn reaches_through_the_first_hit(memories: &[(&str, &str)], query: &str) {
        let plain = found(&index(0, memories), query);
        assert_eq!(plain, vec!["hit.md".to_owned()], "{query}");
        let expanded = found(&index(1, memories), query);
        assert_eq!(
            expanded.first().map(String::as_str),
            Some("hit.md"),
            "{query}"
        );
        assert!(
            expanded.contains(&"topic.md".to_owned()),
            "{query}: {expanded:?}"
        );
        assert!(
            !expanded.contains(&"other.md".to_owned()),
            "{query}: {expanded:?}"
        );
    }

    #[test]
    fn feedback_reaches_memories_that_share_the_best_hits_words() {
        reaches_through_the_first_hit(
            &[
                ("hit.md", "Melanie adopted a puppy named Oscar"),
                ("topic.md", "Oscar the puppy loves running on the beach"),
                ("other.md", "The tax return was filed in April"),
            ],
            "what did Melanie adopt",
        );
    }

    #[test]
    fn feedback_works_in_chinese_russian_and_japanese() {
        reaches_through_the_first_hit(
            &[
                ("hit.md", "梅兰妮收养了一只叫奥斯卡的小狗"),
                ("topic.md", "奥斯卡喜欢在海边奔跑"),
                ("other.md", "四月份交了税"),
            ],
            "梅兰妮收养了什么",
        );
        reaches_through_the_first_hit(
            &[
                ("hit.md", "Мелани взяла щенка по кличке Оскар"),
                ("topic.md", "Оскар любит бегать по пляжу"),
                ("other.md", "Налоговую декларацию подали в апреле"),
            ],
            "кого взяла Мелани",
        );
        reaches_through_the_first_hit(
            &[
                ("hit.md", "メラニーはオスカーという子犬を飼い始めた"),
                ("topic.md", "オスカーが海辺で走り回る"),
                ("other.md", "四月に確定申告をした"),
            ],
            "メラニーは何を飼い始めた",
        );
    }

    #[test]
    fn no_first_hit_means_no_feedback() {
        let idx = index(3, &[("a.md", "Melanie adopted a puppy")]);
        assert!(found(&idx, "quarterly tax return").is_empty());
    }
}
