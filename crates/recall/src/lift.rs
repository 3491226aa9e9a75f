//! The folder lift shared by BM25 ([`Bm25Params::dir_weight`](super::Bm25Params::dir_weight))
//! and the dense half of the hybrid selector
//! ([`HybridConfig::dense_dir_weight`](super::HybridConfig::dense_dir_weight)): every memory in a
//! folder gains a weight × the best score of another memory of that folder.

/// The best and second-best score offered by the members of one folder.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BestTwo {
    top: f32,
    second: f32,
}

impl BestTwo {
    /// Count one member's score.
    pub(crate) fn offer(&mut self, score: f32) {
        if score > self.top {
            self.second = self.top;
            self.top = score;
        } else if score > self.second {
            self.second = score;
        }
    }

    /// The best score of a member other than the one scoring `own`: the second best when `own`
    /// is the best (two members tied at the top lift each other by the top score).
    pub(crate) fn sibling_of(&self, own: f32) -> f32 {
        if own >= self.top {
            self.second
        } else {
            self.top
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_member_is_lifted_by_the_best_other() {
        let mut b = BestTwo::default();
        for s in [0.2, 0.9, 0.5] {
            b.offer(s);
        }
        assert_eq!(b.sibling_of(0.9), 0.5);
        assert_eq!(b.sibling_of(0.5), 0.9);
        assert_eq!(b.sibling_of(0.2), 0.9);
        let mut tied = BestTwo::default();
        tied.offer(0.7);
        tied.offer(0.7);
        assert_eq!(tied.sibling_of(0.7), 0.7);
        let mut alone = BestTwo::default();
        alone.offer(0.4);
        assert_eq!(alone.sibling_of(0.4), 0.0);
    }
}
