//! Text processing shared by the no-model selectors: tokenising, stop words, stemming, bigrams.

use rust_stemmers::{Algorithm, Stemmer};
use std::collections::HashSet;
use std::sync::OnceLock;

/// Common English function words that carry no topic. Our own list: short on purpose, so that
/// content words such as "first" or "new" still count.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "after",
    "again",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "before",
    "being",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "during",
    "each",
    "for",
    "from",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "might",
    "more",
    "most",
    "my",
    "myself",
    "of",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "s",
    "t",
    "d",
    "ll",
    "m",
    "re",
    "ve",
    "don",
    "didn",
    "doesn",
    "isn",
    "wasn",
    "weren",
    "won",
    "let",
    "us",
    "may",
    "much",
    "many",
    "kind",
    "ever",
    "likely",
    "please",
    "tell",
    "know",
    "think",
    "way",
    "thing",
    "things",
];

fn stop_words() -> &'static HashSet<&'static str> {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOP_WORDS.iter().copied().collect())
}

/// Whether `word` (lowercase) is a stop word.
pub fn is_stop_word(word: &str) -> bool {
    stop_words().contains(word)
}

/// Turns text into index terms: lowercase alphanumeric words, stop words removed, Snowball
/// English stems, and optionally adjacent-pair bigrams (`a_b`, over the stemmed, stop-word-free
/// sequence).
pub struct Analyzer {
    stemmer: Stemmer,
    bigrams: bool,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("bigrams", &self.bigrams)
            .finish_non_exhaustive()
    }
}

impl Analyzer {
    /// An English analyzer; `bigrams` adds pair terms after the unigrams.
    pub fn new(bigrams: bool) -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
            bigrams,
        }
    }

    /// The stemmed unigrams of `text`, in order, stop words removed.
    pub fn unigrams(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for word in words(text) {
            if is_stop_word(&word) {
                continue;
            }
            out.push(self.stemmer.stem(&word).into_owned());
        }
        out
    }

    /// Unigrams, then bigrams when enabled.
    ///
    /// ```
    /// use memloop_memory::recall::Analyzer;
    /// let a = Analyzer::new(true);
    /// assert_eq!(a.terms("The running tests"), vec!["run", "test", "run_test"]);
    /// ```
    pub fn terms(&self, text: &str) -> Vec<String> {
        let uni = self.unigrams(text);
        if !self.bigrams || uni.len() < 2 {
            return uni;
        }
        let pairs: Vec<String> = uni
            .windows(2)
            .map(|w| format!("{}_{}", w[0], w[1]))
            .collect();
        let mut all = uni;
        all.extend(pairs);
        all
    }
}

/// Lowercase alphanumeric words of `text` (apostrophes split words: `Melanie's` → `melanie`, `s`).
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_and_drops_stop_words() {
        let a = Analyzer::new(false);
        assert_eq!(
            a.terms("What did Melanie's kids paint?"),
            vec!["melani", "kid", "paint"]
        );
    }

    #[test]
    fn non_ascii_words_survive() {
        let a = Analyzer::new(false);
        assert_eq!(a.terms("Café déjà-vu"), vec!["café", "déjà", "vu"]);
    }
}
