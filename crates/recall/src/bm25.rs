//! [`Bm25Postings`]: incrementally maintained BM25F postings (an inverted index) over memory name,
//! description and body, with an optional directory lift (a memory's score is raised by the best
//! score of another memory in the same directory, so that e.g. a session summary lifts the notes
//! filed next to it).

use super::lift::BestTwo;
use memloop_store::heap;
use memloop_text::{Analyzer, Language, Script, tokens};
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

mod feedback;
mod pruned;
mod scoring;

use pruned::{Block, SEGMENT};
use scoring::{Coordination, Scoring};

const FIELDS: usize = 3;

/// Tuning of the BM25 postings behind [`Bm25Selector`](super::Bm25Selector). The defaults were tuned on LoCoMo (see the crate README).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation. Default 0.9.
    pub k1: f32,
    /// Length normalisation (0 = none, 1 = full). Default 0.4.
    pub b: f32,
    /// Weight of the name field. Default 1.0.
    pub name_weight: f32,
    /// Weight of the description field. Default 1.0.
    pub description_weight: f32,
    /// Weight of the body field. Default 1.0.
    pub body_weight: f32,
    /// Index adjacent word pairs too. Default true.
    pub bigrams: bool,
    /// Score multiplier of bigram matches. Default 0.3.
    pub bigram_weight: f32,
    /// Share of the best sibling's score (same sub-directory) added to a memory's score; 0
    /// disables the lift. Memories at the top of the memory dir are never lifted. Default 0.0:
    /// turn it on for layouts that file related memories together (one folder per session,
    /// project or topic, with a summary next to the details).
    pub dir_weight: f32,
    /// Coordination exponent: a memory's score is multiplied by the share of the query's
    /// (IDF-weighted) words it contains, raised to this power, so that a memory matching most of
    /// the query beats one that matches a single rare word many times; 0 disables it.
    /// Default 0.4.
    pub coordination: f32,
    /// The language of Latin-script words in every memory and query (`Some`), or detected per
    /// memory (`None`, the default; see [`Analyzer`]).
    pub language: Option<Language>,
    /// Pseudo-relevance feedback (RM3-style): how many of a first pass's best memories lend
    /// words to a second pass; 0 (the default) disables it. See [`Self::feedback_terms`].
    pub feedback_docs: usize,
    /// Pseudo-relevance feedback: how many words of the feedback memories (not already in the
    /// query, ranked by their share of those memories' text times IDF) are added. Default 10.
    pub feedback_terms: usize,
    /// Pseudo-relevance feedback: the weight of the heaviest added word relative to a query
    /// word (the others in proportion to their share). Default 0.3.
    pub feedback_weight: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self {
            k1: 0.9,
            b: 0.4,
            name_weight: 1.0,
            description_weight: 1.0,
            body_weight: 1.0,
            bigrams: true,
            bigram_weight: 0.3,
            dir_weight: 0.0,
            coordination: 0.4,
            language: None,
            feedback_docs: 0,
            feedback_terms: 10,
            feedback_weight: 0.3,
        }
    }
}

/// The text of one memory as indexed.
#[derive(Debug, Clone, Copy)]
pub struct IndexText<'a> {
    /// Name (or file stem).
    pub name: &'a str,
    /// Description.
    pub description: &'a str,
    /// Body.
    pub body: &'a str,
}

/// One memory's occurrences of one term. The field lengths are copied here so scoring never
/// leaves the postings list.
#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: [u16; FIELDS],
    lens: [u32; FIELDS],
    /// The memory's language (fits in the padding): only a query analysed in it may score.
    lang: Language,
}

#[derive(Debug)]
struct Doc {
    path: String,
    mtime: SystemTime,
    /// `mtime` as [`time_key`] orders it, computed once.
    newness: u128,
    dir: u32,
    lens: [u32; FIELDS],
    terms: Vec<u32>,
    lang: Language,
}

/// An inverted index of memories keyed by relative path. Updates touch only the changed
/// document; search scores the memories that share a term with the query, segment by segment,
/// and skips the segments that cannot hold one of the best `k` (`bm25/pruned.rs`).
///
/// Each memory is analysed in its own language (its Latin-script words' detected language, or
/// [`Bm25Params::language`]); a query is analysed once per language the index holds and each
/// analysis scores only the memories of its language, so a short query that no detector could
/// place still meets every memory in the memory's own stems.
#[derive(Debug)]
pub struct Bm25Postings {
    /// Shared with the analyses made off the index ([`Self::analyser`]).
    analyzer: Arc<Analyzer>,
    params: Bm25Params,
    term_ids: HashMap<String, u32>,
    is_bigram: Vec<bool>,
    postings: Vec<Vec<Posting>>,
    /// By slot. A memory takes the next slot when it is indexed (slots are never reused
    /// until a sweep renumbers them in the same order), so every postings list is in slot
    /// order.
    docs: Vec<Option<Doc>>,
    alive: Vec<bool>,
    df: Vec<u32>,
    /// Removed memories whose postings are still in the lists (and whose slots are empty).
    tombstones: usize,
    /// Per term, bounds of its postings in each segment of [`SEGMENT`] slots (kept for long
    /// lists only; see [`pruned`]).
    blocks: Vec<Vec<Block>>,
    /// Per segment of [`SEGMENT`] slots, the newest `newness` ever indexed in it.
    seg_newest: Vec<u128>,
    /// Segments the pruned ranking scored (the tests check that it prunes).
    #[cfg(test)]
    scored_segments: std::sync::atomic::AtomicUsize,
    by_path: HashMap<String, u32>,
    dir_ids: HashMap<String, u32>,
    dir_members: Vec<Vec<u32>>,
    len_sum: [u64; FIELDS],
    /// Indexed memories per language (by `Language::ALL` position).
    lang_docs: [u32; Language::ALL.len()],
    /// The heap the tables' items own, counted as [`Self::approx_bytes`] counts: the terms'
    /// and paths' strings, each term's postings and each directory's members, each document's
    /// path and terms. Kept as they change, so the estimate never walks the index.
    owned: usize,
}

impl Default for Bm25Postings {
    fn default() -> Self {
        Self::new(Bm25Params::default())
    }
}

impl Bm25Postings {
    /// An empty index.
    pub fn new(params: Bm25Params) -> Self {
        Self {
            analyzer: Arc::new(Analyzer::new(params.bigrams).with_language(params.language)),
            params,
            term_ids: HashMap::new(),
            is_bigram: Vec::new(),
            postings: Vec::new(),
            docs: Vec::new(),
            alive: Vec::new(),
            df: Vec::new(),
            tombstones: 0,
            blocks: Vec::new(),
            seg_newest: Vec::new(),
            #[cfg(test)]
            scored_segments: Default::default(),
            by_path: HashMap::new(),
            dir_ids: HashMap::new(),
            dir_members: Vec::new(),
            len_sum: [0; FIELDS],
            lang_docs: [0; Language::ALL.len()],
            owned: 0,
        }
    }

    /// An estimate of the memory the index holds, in bytes: its terms, postings, documents
    /// and lookups (what grows with the memories indexed), counted as the allocator holds them
    /// ([`memloop_store::heap`]: buffers by capacity, hash tables by buckets, each allocation
    /// as its block). The index's own struct is counted by whoever holds it. O(1): what the
    /// tables' items own is kept as they change.
    pub fn approx_bytes(&self) -> usize {
        self.tables() + self.owned
    }

    /// The tables themselves (their buffers, not what their items own) and the analyzer.
    fn tables(&self) -> usize {
        use memloop_store::heap::{block, map, vec};
        use std::mem::size_of;
        // The analyzer's Latin-script stemmers: one boxed function (two words) per language.
        let analyzer = block(Language::ALL.len() * 2 * size_of::<usize>());
        analyzer
            + map(&self.term_ids)
            + vec(&self.postings)
            + vec(&self.docs)
            + map(&self.by_path)
            + map(&self.dir_ids)
            + vec(&self.dir_members)
            + vec(&self.is_bigram)
            + vec(&self.df)
            + vec(&self.blocks)
            + vec(&self.seg_newest)
            + vec(&self.alive)
    }

    /// What the tables' items own, found by walking them: what [`Self::owned`] must equal.
    #[cfg(test)]
    fn walked(&self) -> usize {
        use memloop_store::heap::{string, vec};
        self.term_ids.keys().map(string).sum::<usize>()
            + self.postings.iter().map(vec).sum::<usize>()
            + self.blocks.iter().map(vec).sum::<usize>()
            + self
                .docs
                .iter()
                .flatten()
                .map(|d| string(&d.path) + vec(&d.terms))
                .sum::<usize>()
            + self.by_path.keys().map(string).sum::<usize>()
            + self.dir_ids.keys().map(string).sum::<usize>()
            + self.dir_members.iter().map(vec).sum::<usize>()
    }

    /// Number of indexed memories.
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// The mtime recorded for `path`, if indexed.
    pub fn mtime(&self, path: &str) -> Option<SystemTime> {
        let id = *self.by_path.get(path)?;
        self.doc(id).map(|d| d.mtime)
    }

    /// Every indexed path (any order).
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.by_path.keys().map(String::as_str)
    }

    fn doc(&self, id: u32) -> Option<&Doc> {
        self.docs.get(id as usize).and_then(Option::as_ref)
    }

    /// Add or replace the memory at `path` (the selector analyses and inserts apart:
    /// [`Analysed::of`], [`Self::insert`]).
    #[cfg(test)]
    pub fn upsert(&mut self, path: &str, mtime: SystemTime, text: IndexText<'_>) {
        let analysed = Analysed::of(&self.analyzer, text);
        self.insert(path, mtime, analysed);
    }

    /// The analyzer this index analyses memories with, for [`Analysed::of`] run elsewhere (a
    /// blocking thread) while the index stays where it is.
    pub(crate) fn analyser(&self) -> Arc<Analyzer> {
        self.analyzer.clone()
    }

    /// Add or replace the memory at `path`, analysed by [`Analysed::of`] with
    /// [`Self::analyser`].
    pub(crate) fn insert(&mut self, path: &str, mtime: SystemTime, analysed: Analysed) {
        self.remove(path);
        let Analysed { lang, lens, terms } = analysed;
        let mut tfs: HashMap<u32, [u16; FIELDS]> = HashMap::with_capacity(terms.len());
        for (term, pair, tf) in terms {
            let tid = self.term_id(term, pair);
            let e = tfs.entry(tid).or_insert([0; FIELDS]);
            for (sum, n) in e.iter_mut().zip(tf) {
                *sum = sum.saturating_add(n);
            }
        }
        let dir = self.dir_id(path);
        let Ok(id) = u32::try_from(self.docs.len()) else {
            return;
        };
        self.docs.push(None);
        self.alive.push(true);
        let newness = time_key(mtime);
        let seg = (id / SEGMENT) as usize;
        if self.seg_newest.len() <= seg {
            self.seg_newest.resize(seg + 1, 0);
        }
        self.seg_newest[seg] = self.seg_newest[seg].max(newness);
        let mut terms = Vec::with_capacity(tfs.len());
        for (tid, tf) in tfs {
            let posting = Posting {
                doc: id,
                tf,
                lens,
                lang,
            };
            grown(&mut self.owned, &mut self.postings[tid as usize], posting);
            self.note_block(tid);
            self.df[tid as usize] += 1;
            terms.push(tid);
        }
        for (sum, len) in self.len_sum.iter_mut().zip(lens) {
            *sum += u64::from(len);
        }
        grown(&mut self.owned, &mut self.dir_members[dir as usize], id);
        if let Some(n) = self.lang_docs.get_mut(lang.index()) {
            *n += 1;
        }
        let doc = Doc {
            path: path.to_owned(),
            mtime,
            newness,
            dir,
            lens,
            terms,
            lang,
        };
        let key = path.to_owned();
        self.owned += heap::string(&doc.path) + heap::vec(&doc.terms) + heap::string(&key);
        self.docs[id as usize] = Some(doc);
        self.by_path.insert(key, id);
    }

    /// Remove the memory at `path`; returns whether it was indexed.
    ///
    /// Removal is lazy: the memory's postings become tombstones that scoring skips (document
    /// frequencies are exact at once), and they are swept in one pass once they make up a
    /// quarter of the index, so one update costs O(its own terms), not O(postings of common
    /// terms).
    pub fn remove(&mut self, path: &str) -> bool {
        let Some((key, id)) = self.by_path.remove_entry(path) else {
            return false;
        };
        self.owned = self.owned.saturating_sub(heap::string(&key));
        let Some(doc) = self.docs.get_mut(id as usize).and_then(Option::take) else {
            return false;
        };
        self.owned = self
            .owned
            .saturating_sub(heap::string(&doc.path) + heap::vec(&doc.terms));
        self.alive[id as usize] = false;
        for tid in &doc.terms {
            if let Some(df) = self.df.get_mut(*tid as usize) {
                *df = df.saturating_sub(1);
            }
        }
        for (sum, len) in self.len_sum.iter_mut().zip(doc.lens) {
            *sum = sum.saturating_sub(u64::from(len));
        }
        if let Some(n) = self.lang_docs.get_mut(doc.lang.index()) {
            *n = n.saturating_sub(1);
        }
        if let Some(members) = self.dir_members.get_mut(doc.dir as usize) {
            members.retain(|m| *m != id);
        }
        self.tombstones += 1;
        if self.tombstones > 64 && self.tombstones * 4 > self.by_path.len() {
            self.sweep();
        }
        true
    }

    /// Drop the postings of removed memories and number the memories' slots again from 0, in
    /// the order they had (so every postings list stays in slot order).
    fn sweep(&mut self) {
        let mut slot = vec![u32::MAX; self.docs.len()];
        let mut next = 0u32;
        for (old, doc) in self.docs.iter().enumerate() {
            if doc.is_some() {
                slot[old] = next;
                next += 1;
            }
        }
        self.docs.retain(Option::is_some);
        self.alive = vec![true; self.docs.len()];
        for list in &mut self.postings {
            list.retain(|p| slot[p.doc as usize] != u32::MAX);
            for p in list.iter_mut() {
                p.doc = slot[p.doc as usize];
            }
        }
        for id in self.by_path.values_mut() {
            *id = slot[*id as usize];
        }
        for members in &mut self.dir_members {
            for m in members.iter_mut() {
                *m = slot[*m as usize];
            }
        }
        self.tombstones = 0;
        self.seg_newest = vec![0; self.docs.len().div_ceil(SEGMENT as usize)];
        for (i, doc) in self.docs.iter().enumerate() {
            if let Some(d) = doc {
                let seg = &mut self.seg_newest[i / SEGMENT as usize];
                *seg = (*seg).max(d.newness);
            }
        }
        for tid in 0..self.postings.len() {
            self.rebuild_blocks(tid);
        }
    }

    fn term_id(&mut self, term: String, bigram: bool) -> u32 {
        if let Some(id) = self.term_ids.get(&term) {
            return *id;
        }
        let id = u32::try_from(self.postings.len()).unwrap_or(u32::MAX);
        self.postings.push(Vec::new());
        self.blocks.push(Vec::new());
        self.df.push(0);
        self.is_bigram.push(bigram);
        self.owned += heap::string(&term);
        self.term_ids.insert(term, id);
        id
    }

    fn dir_id(&mut self, path: &str) -> u32 {
        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
        if let Some(id) = self.dir_ids.get(dir) {
            return *id;
        }
        let id = u32::try_from(self.dir_members.len()).unwrap_or(u32::MAX);
        self.dir_members.push(Vec::new());
        let key = dir.to_owned();
        self.owned += heap::string(&key);
        self.dir_ids.insert(key, id);
        id
    }

    /// The best `k` memories for `query` among those `keep` accepts, best first, with scores.
    /// Memories with no matching term (and no lift) are not returned.
    pub fn search(&self, query: &str, k: usize, keep: impl Fn(&str) -> bool) -> Vec<(String, f32)> {
        if self.by_path.is_empty() || k == 0 {
            return Vec::new();
        }
        let tokens = tokens(query);
        // Without Latin words the analysis is the same in every language: do it once.
        let latin = tokens.iter().any(|(_, s)| *s == Script::Latin);
        let languages: Vec<Language> = if latin {
            self.languages().collect()
        } else {
            vec![Language::English]
        };
        // Each query term with the languages whose analysis of the query produced it (a bit per
        // language): its postings are read once and count for the memories of those languages.
        // A term of every language (all terms when the memories share one language; Han
        // bigrams, Cyrillic stems, names otherwise) needs no check at all.
        let mut qterms: Vec<QueryTerm> = Vec::new();
        for lang in &languages {
            let terms = self.analyzer.analyze_tokens(tokens.clone(), *lang);
            for t in terms.single.iter().chain(&terms.pairs) {
                let Some(tid) = self.term_ids.get(t) else {
                    continue;
                };
                match qterms.iter_mut().find(|q| q.tid == *tid) {
                    Some(q) => q.langs |= lang_bit(*lang),
                    None => qterms.push(QueryTerm {
                        tid: *tid,
                        langs: lang_bit(*lang),
                        weight: 1.0,
                        expansion: false,
                    }),
                }
            }
        }
        let every = languages.iter().fold(0u16, |m, l| m | lang_bit(*l));
        qterms.sort_unstable_by_key(|q| q.tid);
        if self.prunable(k) {
            return self.search_pruned(&qterms, every, k, keep);
        }
        let (mut scores, mut touched) = self.score(&qterms, every);
        if self.params.feedback_docs > 0 {
            self.add_feedback(&qterms, &mut scores, &mut touched, &keep, every);
        }
        if self.params.dir_weight > 0.0 {
            self.top_k(self.lift(&scores, &touched), k, keep)
        } else {
            self.top_k(touched.iter().map(|d| (*d, scores[*d as usize])), k, keep)
        }
    }

    /// How much of `query` the memories can match at all: the share of its distinct analysed
    /// terms (in any of the memories' languages) that at least one memory contains, in [0, 1];
    /// 1 for a query with no terms. A question in the memories' language scores near 1; one in
    /// another language near 0 (only names, numbers and loanwords are shared), which is when
    /// a ranking by meaning must decide ([`Fusion::fuse_for`](crate::Fusion::fuse_for)).
    pub fn coverage(&self, query: &str) -> f32 {
        let tokens = tokens(query);
        let latin = tokens.iter().any(|(_, s)| *s == Script::Latin);
        let languages: Vec<Language> = if latin {
            self.languages().collect()
        } else {
            vec![Language::English]
        };
        // The analysis (stemming, stop words) of the language that matches best.
        let mut best: Option<f32> = None;
        for lang in &languages {
            let analyzed = self.analyzer.analyze_tokens(tokens.clone(), *lang);
            let mut terms: Vec<&String> = analyzed.single.iter().collect();
            terms.sort_unstable();
            terms.dedup();
            if terms.is_empty() {
                continue;
            }
            let found = terms
                .iter()
                .filter(|t| self.term_ids.contains_key(**t))
                .count();
            let share = found as f32 / terms.len() as f32;
            best = Some(best.map_or(share, |b| b.max(share)));
        }
        best.unwrap_or(1.0)
    }

    /// The languages of the indexed memories.
    pub fn languages(&self) -> impl Iterator<Item = Language> + '_ {
        Language::ALL
            .into_iter()
            .filter(|l| self.lang_docs.get((*l).index()).is_some_and(|n| *n > 0))
    }

    fn idf(&self, tid: u32) -> f32 {
        let n = self.by_path.len() as f32;
        let df = self.df[tid as usize] as f32;
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        if self.is_bigram[tid as usize] {
            idf * self.params.bigram_weight
        } else {
            idf
        }
    }

    /// BM25F scores of every memory sharing a term of `qterms` in one of the term's languages
    /// (dense by doc slot), and the slots touched. `every`: the languages of the memories.
    fn score(&self, qterms: &[QueryTerm], every: u16) -> (Vec<f32>, Vec<u32>) {
        let scoring = Scoring::new(self);
        let mut scores = vec![0f32; self.docs.len()];
        let terms = scoring.terms(self, qterms, every);
        let mut coordination = Coordination::new(self, &terms);
        let coord = coordination.is_some();
        // IDF mass of the query's unigrams each memory matched (per language: a memory is
        // measured against the query analysed in its language).
        let mut matched = vec![0f32; if coord { self.docs.len() } else { 0 }];
        let mut touched: Vec<u32> = Vec::new();
        for (tid, term) in &terms {
            for p in &self.postings[*tid as usize] {
                let Some(share) = term.of(self, &scoring, p) else {
                    continue;
                };
                let slot = &mut scores[p.doc as usize];
                if *slot == 0.0 {
                    touched.push(p.doc);
                }
                *slot += share;
                if coord && term.unigram {
                    matched[p.doc as usize] += term.idf;
                }
            }
        }
        if let Some(coordination) = &mut coordination {
            for d in &touched {
                let lang = || self.doc(*d).map_or(Language::English, |doc| doc.lang);
                scores[*d as usize] *= coordination.factor(matched[*d as usize], lang);
            }
        }
        (scores, touched)
    }

    /// Add `dir_weight` × the best other score of the same directory to every memory of a
    /// directory that has a match.
    fn lift(&self, scores: &[f32], touched: &[u32]) -> Vec<(u32, f32)> {
        let mut best: HashMap<u32, BestTwo> = HashMap::new();
        for d in touched {
            let Some(doc) = self.doc(*d) else { continue };
            best.entry(doc.dir).or_default().offer(scores[*d as usize]);
        }
        let mut out = Vec::new();
        let root = self.dir_ids.get("").copied();
        for (dir, two) in best {
            let members = self.dir_members.get(dir as usize).into_iter().flatten();
            if Some(dir) == root {
                out.extend(members.map(|m| (*m, scores[*m as usize])));
                continue;
            }
            for m in members {
                let own = scores[*m as usize];
                out.push((*m, own + self.params.dir_weight * two.sibling_of(own)));
            }
        }
        out
    }

    /// The best `k` of `ranked` (positive scores only) that `keep` accepts, best first: higher
    /// score, then newer, then path.
    fn top_k(
        &self,
        ranked: impl IntoIterator<Item = (u32, f32)>,
        k: usize,
        keep: impl Fn(&str) -> bool,
    ) -> Vec<(String, f32)> {
        let mut best = TopK::new(k);
        for (d, score) in ranked {
            if let Some(doc) = self.doc(d) {
                best.offer(doc, score, &keep);
            }
        }
        best.into_ranking()
    }
}

/// The best `k` memories offered, kept in a bounded heap: a candidate that cannot beat the
/// current `k`-th costs one float comparison (no path is looked at, `keep` is not asked), so
/// thousands of candidates with tied scores do not turn into thousands of path comparisons.
struct TopK<'a> {
    k: usize,
    /// The worst kept candidate on top.
    best: BinaryHeap<Ranked<'a>>,
}

impl<'a> TopK<'a> {
    fn new(k: usize) -> Self {
        Self {
            k,
            best: BinaryHeap::with_capacity(k.min(1024) + 1),
        }
    }

    /// Offer `doc` with `score` (kept if positive, not NaN, among the best `k`, and `keep`
    /// accepts its path).
    fn offer(&mut self, doc: &'a Doc, score: f32, keep: &impl Fn(&str) -> bool) {
        if score.is_nan() || score <= 0.0 {
            return;
        }
        let full = self.best.len() >= self.k;
        if full && self.best.peek().is_some_and(|w| score < w.score) {
            return;
        }
        let entry = Ranked::new(doc, score);
        if full && self.best.peek().is_some_and(|w| entry >= *w) {
            return;
        }
        if !keep(&doc.path) {
            return;
        }
        if full && let Some(mut worst) = self.best.peek_mut() {
            // The new entry takes the worst one's place: one sift, not a push and a pop
            // (ties come in runs, so this is the common case).
            *worst = entry;
        } else {
            self.best.push(entry);
        }
    }

    /// Once `k` are kept, the key (score and newness, see [`Ranked`]) a memory must beat, or
    /// tie and win on its path, to be kept.
    fn bar(&self) -> Option<u128> {
        (self.best.len() >= self.k)
            .then(|| self.best.peek().map(|w| w.key))
            .flatten()
    }

    fn into_ranking(self) -> Vec<(String, f32)> {
        self.best
            .into_sorted_vec()
            .into_iter()
            .map(|r| (r.doc.path.clone(), r.score))
            .collect()
    }
}

/// A scored memory in [`TopK`], ordered best first: higher score, then newer, then
/// path (paths are unique, so the order is total).
#[derive(Debug, Clone, Copy)]
struct Ranked<'a> {
    /// The score and the mtime in one integer, ordered as they are (higher is better): most
    /// comparisons are one integer comparison, with no look at the memory.
    key: u128,
    doc: &'a Doc,
    score: f32,
}

impl<'a> Ranked<'a> {
    /// `score` must be positive (not NaN): the bits of such floats order as the floats do.
    fn new(doc: &'a Doc, score: f32) -> Self {
        Self {
            key: rank_key(score, doc.newness),
            doc,
            score,
        }
    }
}

/// A score (positive, not NaN) and a `newness` in one integer that orders as (score, newness).
fn rank_key(score: f32, newness: u128) -> u128 {
    (u128::from(score.to_bits()) << 96) | newness
}

/// `mtime` as nanoseconds from 2^95 ns before the epoch, in 96 bits: order-preserving for every
/// time within about 10^12 years of 1970, before it as after it (clamped beyond).
fn time_key(mtime: SystemTime) -> u128 {
    const ZERO: u128 = 1 << 95;
    match mtime.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => ZERO.saturating_add(after.as_nanos()).min((1 << 96) - 1),
        Err(before) => ZERO.saturating_sub(before.duration().as_nanos()),
    }
}

impl Ord for Ranked<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .key
            .cmp(&self.key)
            // Lazily: an eager `then` would compare the paths of every pair.
            .then_with(|| self.doc.path.cmp(&other.doc.path))
    }
}

impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Ranked<'_> {}

/// One term of an analysed query and the languages (bits, see [`lang_bit`]) that produced it.
#[derive(Debug, Clone, Copy)]
struct QueryTerm {
    tid: u32,
    langs: u16,
    /// Multiplies the term's IDF: 1 for the query's own terms, less for feedback words.
    weight: f32,
    /// Added by pseudo-relevance feedback (not the user's word).
    expansion: bool,
}

/// The bit of `lang` in a language set.
fn lang_bit(lang: Language) -> u16 {
    1 << lang.index()
}

/// One memory's text as an index takes it in: its language, its fields' lengths in words, and
/// each distinct term (and whether it is a word pair) with its count per field. The analysis
/// (language detection, tokenizing, stemming) is the costly part of indexing and needs nothing
/// of the index but its analyzer, so a large build runs it off the async runtime
/// ([`Bm25Postings::insert`] then takes the result in).
#[derive(Debug)]
pub(crate) struct Analysed {
    lang: Language,
    lens: [u32; FIELDS],
    terms: Vec<(String, bool, [u16; FIELDS])>,
}

impl Analysed {
    /// Analyse `text` with `analyzer` (an index's [`Bm25Postings::analyser`]).
    pub(crate) fn of(analyzer: &Analyzer, text: IndexText<'_>) -> Self {
        let fields = [text.name, text.description, text.body];
        let lang = analyzer.language().unwrap_or_else(|| {
            analyzer.language_of(&format!(
                "{}\n{}\n{}",
                text.name, text.description, text.body
            ))
        });
        let mut lens = [0u32; FIELDS];
        let mut tfs: HashMap<(String, bool), [u16; FIELDS]> = HashMap::new();
        for (f, field) in fields.iter().enumerate() {
            let analysed = analyzer.analyze_in(field, lang);
            lens[f] = u32::try_from(analysed.single.len()).unwrap_or(u32::MAX);
            let single = analysed.single.into_iter().map(|t| (t, false));
            for key in single.chain(analysed.pairs.into_iter().map(|t| (t, true))) {
                let tf = tfs.entry(key).or_insert([0; FIELDS]);
                tf[f] = tf[f].saturating_add(1);
            }
        }
        let terms = tfs
            .into_iter()
            .map(|((term, pair), tf)| (term, pair, tf))
            .collect();
        Self { lang, lens, terms }
    }
}

/// Push `item` onto `list`, and count in `owned` what the push grew the list's buffer by.
fn grown<T>(owned: &mut usize, list: &mut Vec<T>, item: T) {
    let before = heap::vec(list);
    list.push(item);
    *owned = owned.saturating_sub(before) + heap::vec(list);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<'a>(description: &'a str, body: &'a str) -> IndexText<'a> {
        IndexText {
            name: "",
            description,
            body,
        }
    }

    #[test]
    fn coverage_is_the_share_of_the_query_the_memories_can_match() {
        let mut idx = Bm25Postings::default();
        let t0 = SystemTime::UNIX_EPOCH;
        idx.upsert(
            "db.md",
            t0,
            text("billing database", "We chose PostgreSQL for billing."),
        );
        idx.upsert(
            "cat.md",
            t0,
            text("office cat", "The cat sleeps on the sofa."),
        );
        // In the memories' language: every term is known.
        assert_eq!(idx.coverage("which database for billing?"), 1.0);
        // Half the terms unknown.
        let half = idx.coverage("billing invoices");
        assert!((half - 0.5).abs() < 1e-6, "{half}");
        // Another language: nothing in common but a name.
        assert!(idx.coverage("Какую базу данных использует сервис оплаты?") < 0.01);
        assert!(idx.coverage("计费服务用的是什么数据库？") < 0.01);
        let name = idx.coverage("Welche Datenbank nutzt PostgreSQL für Abrechnung?");
        assert!(name > 0.0 && name < 0.5, "{name}");
        // No terms at all: nothing to judge by.
        assert_eq!(idx.coverage("?!"), 1.0);
    }

    #[test]
    fn remove_and_replace_leave_no_trace() {
        let mut idx = Bm25Postings::default();
        let t0 = SystemTime::UNIX_EPOCH;
        idx.upsert("a.md", t0, text("kafka consumer lag", "alerts fire at 10k"));
        idx.upsert("b.md", t0, text("postgres vacuum", "run weekly"));
        assert_eq!(idx.search("kafka lag", 5, |_| true)[0].0, "a.md");
        idx.upsert("a.md", t0, text("redis eviction", "allkeys-lru"));
        assert!(idx.search("kafka lag", 5, |_| true).is_empty());
        assert_eq!(idx.search("redis", 5, |_| true)[0].0, "a.md");
        assert!(idx.remove("a.md"));
        assert!(!idx.remove("a.md"));
        assert!(idx.search("redis", 5, |_| true).is_empty());
        assert_eq!(idx.len(), 1);
        idx.upsert("c.md", t0, text("redis again", ""));
        assert_eq!(idx.search("redis", 5, |_| true)[0].0, "c.md");
        // Enough churn to sweep the tombstones: results stay exact and slots are reused.
        for round in 0..3 {
            for i in 0..100 {
                idx.upsert(
                    &format!("n{i}.md"),
                    t0,
                    text(&format!("note {round}"), "churn"),
                );
            }
        }
        assert_eq!(idx.len(), 102);
        assert!(idx.docs.len() < 250, "slots are reused after a sweep");
        let hits = idx.search("churn", 200, |_| true);
        assert_eq!(hits.len(), 100);
        assert_eq!(idx.search("redis", 5, |_| true)[0].0, "c.md");
    }

    #[test]
    fn the_kept_estimate_is_what_a_walk_of_the_index_finds() {
        let mut idx = Bm25Postings::default();
        let t0 = SystemTime::UNIX_EPOCH;
        // Latin, Chinese (bigrams), Japanese and Russian terms.
        let words = [
            "kafka",
            "lag",
            "数据库迁移",
            "eviction",
            "デプロイ手順",
            "очистка",
            "Tuesday",
        ];
        // A fixed pseudo-random sequence of upserts (new paths, rewrites, other directories)
        // and removals, enough of them to sweep tombstones and reuse slots.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for step in 0..3000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let n = (x >> 33) as usize;
            let path = format!("dir{}/m{}.md", n % 5, n % 150);
            if n % 4 == 0 {
                idx.remove(&path);
            } else {
                let body: Vec<&str> = (0..(n % 40)).map(|i| words[(n + i * 7) % 7]).collect();
                let unique = format!("word{step}");
                idx.upsert(&path, t0, text(&unique, &body.join(" ")));
            }
            assert_eq!(idx.owned, idx.walked(), "after step {step}");
        }
        assert!(idx.approx_bytes() > idx.tables());
    }

    #[test]
    fn field_weights_rank_and_keep_filters() {
        let mut idx = Bm25Postings::new(Bm25Params {
            description_weight: 2.0,
            ..Bm25Params::default()
        });
        let t0 = SystemTime::UNIX_EPOCH;
        idx.upsert("body.md", t0, text("misc", "no deploy on friday"));
        idx.upsert("desc.md", t0, text("no deploy on friday", "misc"));
        let got = idx.search("deploy friday", 5, |_| true);
        assert_eq!(got[0].0, "desc.md");
        let got = idx.search("deploy friday", 5, |p| p != "desc.md");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "body.md");
    }

    #[test]
    fn coordination_prefers_memories_matching_more_of_the_query() {
        let t0 = SystemTime::UNIX_EPOCH;
        let fill = |idx: &mut Bm25Postings| {
            idx.upsert("one.md", t0, text("kafka kafka kafka kafka", "kafka kafka"));
            idx.upsert("both.md", t0, text("kafka consumer", "notes"));
            idx.upsert("other.md", t0, text("consumer survey", "retail"));
        };
        let mut off = Bm25Postings::new(Bm25Params {
            coordination: 0.0,
            ..Bm25Params::default()
        });
        fill(&mut off);
        let mut on = Bm25Postings::default();
        fill(&mut on);
        let score = |idx: &Bm25Postings, path: &str| {
            idx.search("kafka consumer", 5, |_| true)
                .into_iter()
                .find(|r| r.0 == path)
                .map(|r| r.1)
                .unwrap()
        };
        // Full coverage keeps its score; partial coverage is scaled down.
        assert_eq!(score(&on, "both.md"), score(&off, "both.md"));
        assert!(score(&on, "one.md") < score(&off, "one.md"));
        assert!(score(&on, "other.md") < score(&off, "other.md"));
    }

    #[test]
    fn directory_lift_raises_siblings_but_never_at_the_root() {
        let params = Bm25Params {
            dir_weight: 0.5,
            ..Bm25Params::default()
        };
        let mut idx = Bm25Postings::new(params);
        let t0 = SystemTime::UNIX_EPOCH;
        idx.upsert(
            "s1/summary.md",
            t0,
            text("trip to lisbon", "we planned the lisbon trip"),
        );
        idx.upsert(
            "s1/detail.md",
            t0,
            text("flights booked", "tap air, window seats"),
        );
        idx.upsert("s2/detail.md", t0, text("dentist appointment", "tuesday"));
        idx.upsert("root-a.md", t0, text("lisbon restaurants", ""));
        idx.upsert("root-b.md", t0, text("unrelated", "nothing"));
        let got: Vec<String> = idx
            .search("lisbon trip", 10, |_| true)
            .into_iter()
            .map(|r| r.0)
            .collect();
        assert!(
            got.contains(&"s1/detail.md".to_owned()),
            "lifted by its summary: {got:?}"
        );
        assert!(!got.contains(&"s2/detail.md".to_owned()));
        assert!(
            !got.contains(&"root-b.md".to_owned()),
            "the root dir never lifts"
        );
    }

    #[test]
    fn bounded_top_k_matches_a_full_ranking_with_ties() {
        // Many memories with equal scores and equal mtimes (the order then falls to mtime and
        // path), in English, Chinese, Japanese and Russian: every k and filter must give exactly
        // the prefix of the full ranking.
        let mut idx = Bm25Postings::default();
        let t0 = SystemTime::UNIX_EPOCH;
        let texts = [
            ("deploy queue", "the deploy queue retries on timeout"),
            ("部署队列", "部署队列在超时后重试"),
            ("デプロイキュー", "デプロイキューはタイムアウトで再試行する"),
            (
                "очередь деплоя",
                "очередь деплоя повторяет попытку по таймауту",
            ),
        ];
        for i in 0..240u64 {
            let (d, b) = texts[(i % 4) as usize];
            // Three mtimes only: large groups tie on score and mtime.
            let mtime = t0 + std::time::Duration::from_secs(i % 3);
            let body = if i % 5 == 0 {
                format!("{b} {b}")
            } else {
                b.to_owned()
            };
            idx.upsert(&format!("d{}/m{i:03}.md", i % 7), mtime, text(d, &body));
        }
        for query in [
            "deploy queue timeout",
            "部署队列超时",
            "デプロイキュー",
            "очередь деплоя",
        ] {
            let full = idx.search(query, usize::MAX, |_| true);
            assert!(full.len() >= 60, "{query}: {}", full.len());
            for k in [1, 2, 5, 17, 59, full.len(), full.len() + 3] {
                let got = idx.search(query, k, |_| true);
                assert_eq!(got, full[..k.min(full.len())].to_vec(), "{query} k={k}");
            }
            let keep = |p: &str| !p.starts_with("d3/") && !p.ends_with("0.md");
            let kept: Vec<_> = full.iter().filter(|(p, _)| keep(p)).cloned().collect();
            for k in [1, 5, 23] {
                assert_eq!(
                    idx.search(query, k, keep),
                    kept[..k].to_vec(),
                    "{query} k={k}"
                );
            }
        }
    }

    #[test]
    fn the_ranking_is_score_then_newer_then_path() {
        // Equal texts score equal; a doubled body scores higher. The mtimes straddle the epoch
        // and differ by single nanoseconds and by centuries.
        use std::time::Duration;
        let epoch = SystemTime::UNIX_EPOCH;
        let mut mtimes = vec![
            epoch - Duration::from_secs(5),
            epoch - Duration::from_nanos(1),
            epoch,
            epoch + Duration::from_nanos(1),
            epoch + Duration::from_secs(1_800_000_000),
            epoch + Duration::from_secs(1_800_000_000) + Duration::from_nanos(1),
            epoch + Duration::from_secs(60 * 60 * 24 * 365 * 3000),
        ];
        mtimes.extend(mtimes.clone()); // every mtime twice: the path decides
        let mut idx = Bm25Postings::default();
        let mut expected: Vec<(bool, SystemTime, String)> = Vec::new();
        // Inserted oldest first, as saves arrive, and newest first.
        for (i, mtime) in mtimes.iter().chain(mtimes.iter().rev()).enumerate() {
            let doubled = i % 3 == 0;
            let body = if doubled {
                "queue retries queue retries"
            } else {
                "queue retries"
            };
            let path = format!("m{:02}.md", (i * 9) % 28);
            idx.upsert(&path, *mtime, text("notes", body));
            expected.retain(|(_, _, p)| *p != path);
            expected.push((doubled, *mtime, path));
        }
        expected.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then_with(|| b.1.cmp(&a.1))
                .then_with(|| a.2.cmp(&b.2))
        });
        let expected: Vec<String> = expected.into_iter().map(|(_, _, p)| p).collect();
        for k in [1, 3, 10, expected.len()] {
            let got: Vec<String> = idx
                .search("queue retries", k, |_| true)
                .into_iter()
                .map(|(p, _)| p)
                .collect();
            assert_eq!(got, expected[..k].to_vec(), "k={k}");
        }
    }

    #[test]
    fn upsert_example() {
        let mut idx = Bm25Postings::default();
        let t = IndexText {
            name: "Deploys",
            description: "how we ship releases",
            body: "tag then push",
        };
        idx.upsert("deploy.md", std::time::SystemTime::UNIX_EPOCH, t);
        assert_eq!(
            idx.search("shipping a release", 5, |_| true)[0].0,
            "deploy.md"
        );
    }
}
