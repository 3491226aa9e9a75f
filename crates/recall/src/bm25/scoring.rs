//! One memory's BM25F score, computed the same way by the exhaustive ranking and by the pruned
//! one ([`super::pruned`]): the same operations in the same order, so both give every memory the
//! same score to the bit, and a bound computed from larger counts and shorter fields is never
//! below the score it bounds (each step is monotone in floating point, see [`ScoredTerm::share`]).

use super::{Bm25Postings, FIELDS, Posting, QueryTerm, lang_bit};
use memloop_text::Language;

/// A query's constants: the field weights and length norms (the division by the average
/// length done once), and `k1`.
pub(super) struct Scoring {
    weights: [f32; FIELDS],
    /// `b / average length` per field.
    per_len: [f32; FIELDS],
    one_minus_b: f32,
    k1: f32,
}

impl Scoring {
    pub(super) fn new(index: &Bm25Postings) -> Self {
        let n = index.by_path.len().max(1);
        let p = &index.params;
        let avg: [f32; FIELDS] =
            std::array::from_fn(|f| (index.len_sum[f] as f32 / n as f32).max(1.0));
        Self {
            weights: [p.name_weight, p.description_weight, p.body_weight],
            per_len: std::array::from_fn(|f| p.b / avg[f]),
            one_minus_b: 1.0 - p.b,
            k1: p.k1,
        }
    }

    /// The length-normalised, weighted term frequency over the fields: nondecreasing in each
    /// count and nonincreasing in each length (for `b` in 0..=1 and weights ≥ 0).
    fn tf(&self, tf: [u16; FIELDS], lens: [u32; FIELDS]) -> f32 {
        let mut sum = 0f32;
        for f in 0..FIELDS {
            if tf[f] > 0 {
                let norm = self.one_minus_b + self.per_len[f] * lens[f] as f32;
                sum += self.weights[f] * f32::from(tf[f]) / norm;
            }
        }
        sum
    }

    /// The constants of each query term some memory has, with its term id, in the query's
    /// order: what both rankings and [`Coordination::new`] work from.
    pub(super) fn terms(
        &self,
        index: &Bm25Postings,
        qterms: &[QueryTerm],
        every: u16,
    ) -> Vec<(u32, ScoredTerm)> {
        qterms
            .iter()
            .filter_map(|q| self.term(index, q, every).map(|t| (q.tid, t)))
            .collect()
    }

    /// One query term's constants, or `None` when no memory has it.
    fn term(&self, index: &Bm25Postings, q: &QueryTerm, every: u16) -> Option<ScoredTerm> {
        let t = q.tid as usize;
        if index.df.get(t).is_none_or(|df| *df == 0) {
            return None;
        }
        let idf = index.idf(q.tid) * q.weight;
        let saturated = idf * (self.k1 + 1.0);
        Some(ScoredTerm {
            idf,
            saturated,
            scaled: saturated * self.k1,
            k1: self.k1,
            langs: q.langs,
            check: q.langs & every != every,
            // Words added by feedback score but do not count towards coordination.
            unigram: !index.is_bigram[t] && !q.expansion,
        })
    }
}

/// One query term, ready to score postings.
pub(super) struct ScoredTerm {
    /// Its IDF times its weight (what coordination counts).
    pub(super) idf: f32,
    saturated: f32,
    /// `saturated * k1`.
    scaled: f32,
    k1: f32,
    langs: u16,
    /// Whether a posting's language must be checked (the term is not every language's).
    check: bool,
    /// A word of the user's query (not a pair, not a feedback word).
    pub(super) unigram: bool,
}

impl ScoredTerm {
    /// What a memory with these counts and field lengths gets for this term:
    /// `saturated * tf / (k1 + tf)`, written as `saturated - saturated * k1 / (k1 + tf)` so
    /// that every step (an addition, a division by a larger number, a subtraction of a smaller
    /// one) is monotone in floating point: larger counts or shorter fields never give less.
    pub(super) fn share(&self, scoring: &Scoring, tf: [u16; FIELDS], lens: [u32; FIELDS]) -> f32 {
        let tf = scoring.tf(tf, lens);
        (self.saturated - self.scaled / (self.k1 + tf)).max(0.0)
    }

    /// The share of posting `p`, or `None` when it does not count (its memory was removed, it
    /// is of a language this term was not analysed in, or it scores nothing: a zero weight).
    pub(super) fn of(&self, index: &Bm25Postings, scoring: &Scoring, p: &Posting) -> Option<f32> {
        let alive = index.alive.get(p.doc as usize).copied().unwrap_or(false);
        if !alive || (self.check && self.langs & lang_bit(p.lang) == 0) {
            return None;
        }
        Some(self.share(scoring, p.tf, p.lens)).filter(|s| *s > 0.0)
    }
}

/// The coordination factor: a memory's score is multiplied by the share of the query's
/// (IDF-weighted) words it matched, raised to [`Bm25Params::coordination`]; at most 1.
///
/// [`Bm25Params::coordination`]: super::Bm25Params::coordination
pub(super) struct Coordination {
    exponent: f32,
    /// IDF mass of the query's words per language (a memory is measured against the query
    /// analysed in its language).
    total: [f32; Language::ALL.len()],
    /// One total for every language (the usual case): no need to look up each memory's.
    same_total: Option<f32>,
    /// `share.powf(exponent)` for the shares seen: a memory's share depends only on which
    /// query words it matched, a handful of distinct values.
    powers: Vec<(u32, f32)>,
    /// Whether [`Self::factor`] is monotone over the shares a query can give, so that
    /// [`Self::bound`] needs no margin (see there).
    monotone: bool,
}

impl Coordination {
    /// `None` when coordination is off. `terms`: the query's terms ([`Scoring::terms`]).
    pub(super) fn new(index: &Bm25Postings, terms: &[(u32, ScoredTerm)]) -> Option<Self> {
        let exponent = index.params.coordination;
        if exponent.is_nan() || exponent <= 0.0 {
            return None;
        }
        let mut total = [0f32; Language::ALL.len()];
        let mut lightest = f32::INFINITY;
        for (_, term) in terms {
            if term.unigram {
                lightest = lightest.min(term.idf);
                for l in Language::ALL {
                    if term.langs & lang_bit(l) != 0 {
                        total[l.index()] += term.idf;
                    }
                }
            }
        }
        // Every term in every language: one total serves every memory.
        let same_total = terms
            .iter()
            .all(|(_, t)| !t.check)
            .then_some(total.iter().copied().fold(0f32, f32::max));
        // A memory's matched words are a subset of those its segment has: the same set gives
        // the same share to the bit (summed in the same order), a smaller one a share smaller
        // by at least the lightest word's share of the total, less a few units of rounding
        // (about 6e-8 each below 1). With an exponent in 0.25..=1 the powers then differ by at
        // least `exponent` times that, more than twice `powf`'s error (under one unit in the
        // last place) when that share is at least 1e-6.
        let monotone = (0.25..=1.0).contains(&exponent)
            && same_total.is_some_and(|t| t > 0.0 && lightest / t >= 1e-6);
        Some(Self {
            exponent,
            total,
            same_total,
            powers: Vec::new(),
            monotone,
        })
    }

    /// At least the factor of any memory that matched at most `matched` of the query's IDF mass
    /// (summed in the query's order), in any language; at most 1. [`Self::factor`] itself when
    /// that is monotone over the query's shares (memories tied on a partial match can then be
    /// pruned), a little above it otherwise (`powf` is not promised to be monotone to the last
    /// bit), and 1 when the query's words differ by language.
    pub(super) fn bound(&mut self, matched: f32) -> f32 {
        if self.same_total.is_none() {
            return 1.0;
        }
        let factor = self.factor(matched, || Language::English);
        if self.monotone {
            factor
        } else {
            (factor * (1.0 + 1e-6)).min(1.0)
        }
    }

    /// The factor of a memory that matched `matched` of the query's IDF mass; `lang` gives its
    /// language (asked only when the query's words differ by language).
    pub(super) fn factor(&mut self, matched: f32, lang: impl FnOnce() -> Language) -> f32 {
        let total = match self.same_total {
            Some(t) => t,
            None => self.total.get(lang().index()).copied().unwrap_or(0.0),
        };
        if total.is_nan() || total <= 0.0 {
            return 1.0;
        }
        let share = matched / total;
        let bits = share.to_bits();
        if let Some((_, p)) = self.powers.iter().find(|(b, _)| *b == bits) {
            return *p;
        }
        let p = share.powf(self.exponent);
        if self.powers.len() < 64 {
            self.powers.push((bits, p));
        }
        p
    }
}
