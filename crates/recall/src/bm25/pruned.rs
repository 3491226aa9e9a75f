//! The best `k` memories without scoring every memory that matches (block-max pruning).
//!
//! Memories take slots in the order they are indexed, and the slots are cut into segments of
//! [`SEGMENT`]. Each long postings list keeps, per segment it has postings in, a [`Block`]: the
//! largest counts and the shortest fields among them. A query first bounds every segment's best
//! score (each term's share computed from its block's counts and lengths, summed in the query's
//! order: never below the score of any memory there, see [`super::scoring`]), then scores whole
//! segments exactly, highest bound first (newest first among equal bounds), and stops taking a
//! segment once the `k`-th best kept beats everything the segment could hold: a higher score,
//! or an equal score and a newer memory than any the segment was given. A query that every
//! memory matches equally (a project where every note says the same thing) then costs a few
//! segments, not the project; one whose words are rare costs their postings, as before.
//!
//! The ranking is the exhaustive one exactly (score, then newer, then path): every memory's
//! score is computed by the same function in both, and a segment is skipped only when none of
//! its memories could be kept.

use super::scoring::{Coordination, ScoredTerm, Scoring};
use super::{Bm25Postings, FIELDS, Posting, QueryTerm, TopK, grown, rank_key};
use memloop_store::heap;
use std::ops::Range;

/// Slots per segment.
pub(super) const SEGMENT: u32 = 128;

/// Lists at least this long keep blocks; a shorter one is bounded from its postings at query
/// time (it costs what scoring it would).
const BLOCKED: usize = 128;

/// The postings of one term in one segment: where they start in the list, their largest
/// counts and their shortest fields (bounds: a posting removed since still counts).
#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
    seg: u32,
    start: u32,
    max_tf: [u16; FIELDS],
    min_len: [u32; FIELDS],
}

impl Block {
    fn of(seg: u32, start: u32, p: &Posting) -> Self {
        Self {
            seg,
            start,
            max_tf: p.tf,
            min_len: p.lens,
        }
    }

    fn widen(&mut self, p: &Posting) {
        for f in 0..FIELDS {
            self.max_tf[f] = self.max_tf[f].max(p.tf[f]);
            self.min_len[f] = self.min_len[f].min(p.lens[f]);
        }
    }
}

/// The blocks of `list` (in slot order), or none when it is short.
fn blocks_of(list: &[Posting]) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    if list.len() < BLOCKED {
        return blocks;
    }
    for (i, p) in list.iter().enumerate() {
        let seg = p.doc / SEGMENT;
        match blocks.last_mut() {
            Some(b) if b.seg == seg => b.widen(p),
            _ => blocks.push(Block::of(seg, u32::try_from(i).unwrap_or(u32::MAX), p)),
        }
    }
    blocks
}

impl Bm25Postings {
    /// A posting was pushed onto the list of `tid`: keep its blocks.
    pub(super) fn note_block(&mut self, tid: u32) {
        let t = tid as usize;
        let (Some(list), Some(blocks)) = (self.postings.get(t), self.blocks.get_mut(t)) else {
            return;
        };
        if list.len() < BLOCKED {
            return;
        }
        if blocks.is_empty() {
            self.rebuild_blocks(t);
            return;
        }
        let Some(p) = list.last() else {
            return;
        };
        let seg = p.doc / SEGMENT;
        match blocks.last_mut() {
            Some(b) if b.seg == seg => b.widen(p),
            _ => {
                let start = u32::try_from(list.len() - 1).unwrap_or(u32::MAX);
                grown(&mut self.owned, blocks, Block::of(seg, start, p));
            }
        }
    }

    /// Compute the blocks of list `tid` again (after a sweep renumbered its postings).
    pub(super) fn rebuild_blocks(&mut self, tid: usize) {
        let (Some(list), Some(blocks)) = (self.postings.get(tid), self.blocks.get_mut(tid)) else {
            return;
        };
        let before = heap::vec(blocks);
        *blocks = blocks_of(list);
        self.owned = self.owned.saturating_sub(before) + heap::vec(blocks);
    }

    /// Whether the pruned ranking gives the exhaustive one for these parameters: no directory
    /// lift and no feedback (both add to a memory what other memories scored), `k1` > 0, `b` in
    /// 0..=1 and weights ≥ 0 (what makes a bound from larger counts and shorter fields a bound),
    /// and fewer wanted than indexed.
    pub(super) fn prunable(&self, k: usize) -> bool {
        let p = &self.params;
        p.dir_weight == 0.0
            && p.feedback_docs == 0
            && p.k1 > 0.0
            && (0.0..=1.0).contains(&p.b)
            && [p.name_weight, p.description_weight, p.body_weight]
                .iter()
                .all(|w| *w >= 0.0)
            && k < self.by_path.len()
    }

    /// [`Self::search`]'s ranking (see the module docs) when [`Self::prunable`].
    pub(super) fn search_pruned(
        &self,
        qterms: &[QueryTerm],
        every: u16,
        k: usize,
        keep: impl Fn(&str) -> bool,
    ) -> Vec<(String, f32)> {
        let scoring = Scoring::new(self);
        let terms = scoring.terms(self, qterms, every);
        let mut coordination = Coordination::new(self, &terms);
        let bounds = self.bounds(&scoring, &terms, coordination.as_mut());
        let newest = |seg: usize| self.seg_newest.get(seg).copied().unwrap_or(u128::MAX);
        let mut order: Vec<usize> = (0..bounds.len()).filter(|s| bounds[*s] > 0.0).collect();
        order.sort_unstable_by(|a, b| {
            bounds[*b]
                .total_cmp(&bounds[*a])
                .then(newest(*b).cmp(&newest(*a)))
        });
        let mut best = TopK::new(k);
        for seg in order {
            let bound = bounds[seg];
            if let Some(bar) = best.bar() {
                if rank_key(bound, newest(seg)) < bar {
                    // Later segments are bounded no higher: once the bar's score is above this
                    // bound, none of them can hold a memory that is kept.
                    if u128::from(bound.to_bits()) < bar >> 96 {
                        break;
                    }
                    continue;
                }
            }
            self.score_segment(
                seg,
                &scoring,
                &terms,
                coordination.as_mut(),
                &mut best,
                &keep,
            );
        }
        best.into_ranking()
    }

    /// Each segment's bound: per term (in the query's order), the largest share any of its
    /// postings in the segment could get; times the coordination factor of a memory that
    /// matched every query word the segment has (a memory matching fewer gets less).
    fn bounds(
        &self,
        scoring: &Scoring,
        terms: &[(u32, ScoredTerm)],
        coordination: Option<&mut Coordination>,
    ) -> Vec<f32> {
        let segments = self.docs.len().div_ceil(SEGMENT as usize);
        let mut bounds = vec![0f32; segments];
        // The IDF mass of the query's words each segment has (in the query's order).
        let mut words = vec![0f32; if coordination.is_some() { segments } else { 0 }];
        let mut has = vec![false; segments];
        for (tid, term) in terms {
            let t = *tid as usize;
            has.fill(false);
            let blocks = &self.blocks[t];
            if blocks.is_empty() {
                // A short list: each segment's best share, from the postings themselves.
                let list = &self.postings[t];
                let mut i = 0;
                while let Some(first) = list.get(i) {
                    let seg = first.doc / SEGMENT;
                    let mut most = 0f32;
                    while let Some(p) = list.get(i).filter(|p| p.doc / SEGMENT == seg) {
                        most = most.max(term.share(scoring, p.tf, p.lens));
                        i += 1;
                    }
                    if let Some(b) = bounds.get_mut(seg as usize) {
                        *b += most;
                        has[seg as usize] = true;
                    }
                }
            } else {
                for block in blocks {
                    if let Some(b) = bounds.get_mut(block.seg as usize) {
                        *b += term.share(scoring, block.max_tf, block.min_len);
                        has[block.seg as usize] = true;
                    }
                }
            }
            if term.unigram {
                for (w, _) in words.iter_mut().zip(&has).filter(|(_, h)| **h) {
                    *w += term.idf;
                }
            }
        }
        if let Some(c) = coordination {
            for (b, w) in bounds.iter_mut().zip(&words) {
                *b *= c.bound(*w);
            }
        }
        bounds
    }

    /// Where the postings of segment `seg` are in the list of `tid`.
    fn segment_range(&self, tid: usize, seg: u32) -> Range<usize> {
        let list = &self.postings[tid];
        let blocks = &self.blocks[tid];
        if blocks.is_empty() {
            let first = seg * SEGMENT;
            let from = list.partition_point(|p| p.doc < first);
            let to = list.partition_point(|p| p.doc < first.saturating_add(SEGMENT));
            return from..to;
        }
        match blocks.binary_search_by_key(&seg, |b| b.seg) {
            Ok(i) => {
                let to = blocks.get(i + 1).map_or(list.len(), |n| n.start as usize);
                blocks[i].start as usize..to
            }
            Err(_) => 0..0,
        }
    }

    /// Score the memories of segment `seg` exactly (as [`Self::score`] does) and offer them.
    fn score_segment<'a>(
        &'a self,
        seg: usize,
        scoring: &Scoring,
        terms: &[(u32, ScoredTerm)],
        mut coordination: Option<&mut Coordination>,
        best: &mut TopK<'a>,
        keep: &impl Fn(&str) -> bool,
    ) {
        let Ok(seg) = u32::try_from(seg) else {
            return;
        };
        #[cfg(test)]
        self.scored_segments
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let first = seg * SEGMENT;
        let mut scores = [0f32; SEGMENT as usize];
        let mut matched = [0f32; SEGMENT as usize];
        let mut touched = [false; SEGMENT as usize];
        for (tid, term) in terms {
            let range = self.segment_range(*tid as usize, seg);
            for p in &self.postings[*tid as usize][range] {
                let Some(share) = term.of(self, scoring, p) else {
                    continue;
                };
                let local = (p.doc - first) as usize;
                scores[local] += share;
                touched[local] = true;
                if term.unigram {
                    matched[local] += term.idf;
                }
            }
        }
        for local in (0..SEGMENT as usize).filter(|l| touched[*l]) {
            let Some(doc) = self.doc(first + local as u32) else {
                continue;
            };
            let mut score = scores[local];
            if let Some(c) = coordination.as_deref_mut() {
                score *= c.factor(matched[local], || doc.lang);
            }
            best.offer(doc, score, keep);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::IndexText;
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::Ordering;
    use std::time::{Duration, SystemTime};

    /// A small deterministic generator (xorshift), seeded by proptest.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n.max(1) as u64) as usize
        }
    }

    const WORDS: [&str; 24] = [
        "deploy",
        "pipeline",
        "release",
        "queue",
        "billing",
        "export",
        "retry",
        "timeout",
        "cache",
        "schema",
        "index",
        "token",
        "owner",
        "batch",
        "journal",
        "search",
        "部署",
        "队列",
        "超时",
        "очередь",
        "деплоя",
        "релиз",
        "デプロイ",
        "キュー",
    ];

    fn words(rng: &mut Rng, n: usize) -> String {
        (0..n)
            .map(|_| WORDS[rng.below(WORDS.len())])
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The exhaustive ranking's first `k` (`usize::MAX` is never pruned).
    fn exhaustive(
        idx: &Bm25Postings,
        query: &str,
        k: usize,
        keep: &dyn Fn(&str) -> bool,
    ) -> Vec<(String, f32)> {
        let mut full = idx.search(query, usize::MAX, keep);
        full.truncate(k);
        full
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        /// Random memories (lengths, repeated words, four languages, a few mtimes so that
        /// scores and times tie), updated and removed enough to sweep and renumber: for random
        /// queries, `k` and filters, the pruned ranking is the exhaustive one exactly.
        #[test]
        fn the_pruned_ranking_is_the_exhaustive_one(seed in 1u64..u64::MAX) {
            let mut rng = Rng(seed);
            let mut idx = Bm25Postings::default();
            let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
            let memories = 600 + rng.below(900);
            let write = |idx: &mut Bm25Postings, rng: &mut Rng, i: usize| {
                let n = 1 + rng.below(3);
                let name = words(rng, n);
                let n = rng.below(6);
                let description = words(rng, n);
                let n = rng.below(25);
                let body = words(rng, n);
                let mtime = t0 + Duration::from_secs(rng.below(4) as u64);
                let text = IndexText { name: &name, description: &description, body: &body };
                idx.upsert(&format!("d{}/m{i:04}.md", i % 5), mtime, text);
            };
            for i in 0..memories {
                write(&mut idx, &mut rng, i);
            }
            for _ in 0..memories / 2 {
                let i = rng.below(memories);
                if rng.below(3) == 0 {
                    idx.remove(&format!("d{}/m{i:04}.md", i % 5));
                } else {
                    write(&mut idx, &mut rng, i);
                }
            }
            for _ in 0..12 {
                let n = 1 + rng.below(4);
                let query = words(&mut rng, n);
                let k = [1, 2, 5, 10, 40][rng.below(5)];
                let cut = rng.below(5);
                let keep = move |p: &str| cut == 0 || !p.starts_with(&format!("d{cut}/"));
                prop_assert_eq!(
                    idx.search(&query, k, keep),
                    exhaustive(&idx, &query, k, &keep),
                    "{} k={} without d{}/", query, k, cut
                );
            }
        }
    }

    /// Equal scores and equal times: the path decides, wherever in the slots the memories with
    /// the first paths are (here in the last segment), so a segment whose bound only ties the
    /// `k`-th kept is still scored.
    #[test]
    fn ties_on_score_and_time_fall_to_the_path_in_any_segment() {
        let mut idx = Bm25Postings::default();
        let mtime = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        for i in (0..700).rev() {
            let text = IndexText {
                name: "deploy note",
                description: "",
                body: "deploy the queue",
            };
            idx.upsert(&format!("notes/m{i:04}.md"), mtime, text);
        }
        let got: Vec<String> = idx
            .search("deploy queue", 3, |_| true)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(got, ["notes/m0000.md", "notes/m0001.md", "notes/m0002.md"]);
    }

    /// Every memory says the same thing (as a load client's notes do): the five best are the
    /// five newest, found by scoring a segment or two of the 5,000 memories, before and after
    /// updates renumber the slots.
    #[test]
    fn a_query_every_memory_matches_equally_scores_a_few_segments() {
        let mut idx = Bm25Postings::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let note = |idx: &mut Bm25Postings, i: usize, at: u64| {
            let marker = format!("lc{i:05}");
            let body = format!("Deploy pipeline note {marker}: releases go out on Tuesdays.");
            let name = format!("load {marker}");
            let text = IndexText {
                name: &name,
                description: &name,
                body: &body,
            };
            idx.upsert(
                &format!("knowledge/{marker}.md"),
                t0 + Duration::from_secs(at),
                text,
            );
        };
        for i in 0..5_000 {
            note(&mut idx, i, i as u64);
        }
        // The paths `query` ranks first (k of them) and how many segments it scored.
        let ranked = |idx: &Bm25Postings, query: &str, k: usize| {
            idx.scored_segments.store(0, Ordering::Relaxed);
            let got: Vec<String> = idx
                .search(query, k, |_| true)
                .into_iter()
                .map(|(p, _)| p)
                .collect();
            (got, idx.scored_segments.load(Ordering::Relaxed))
        };
        let check = |idx: &Bm25Postings, newest: &[usize]| {
            let (got, scored) = ranked(idx, "deploy pipeline release", 5);
            let want: Vec<String> = newest
                .iter()
                .map(|i| format!("knowledge/lc{i:05}.md"))
                .collect();
            assert_eq!(got, want);
            assert!(
                scored <= 2,
                "{scored} of {} segments scored",
                idx.seg_newest.len()
            );
        };
        check(&idx, &[4999, 4998, 4997, 4996, 4995]);
        // Old memories rewritten (the newest now): their old slots become tombstones and,
        // past a quarter of the index, a sweep renumbers every slot.
        for (n, i) in (0..1_500).enumerate() {
            note(&mut idx, i, 10_000 + n as u64);
        }
        check(&idx, &[1499, 1498, 1497, 1496, 1495]);
        // One memory has a rare word too: it comes first, then the newest of those that match
        // only the common words (scaled by coordination, tied), from two segments.
        let (got, scored) = ranked(&idx, "tuesdays deploy lc02500", 3);
        assert_eq!(
            got,
            [
                "knowledge/lc02500.md",
                "knowledge/lc01499.md",
                "knowledge/lc01498.md"
            ]
        );
        assert!(scored <= 2, "{scored} segments scored");
    }
}
