//! The one text analyzer of recall: every lexical selector (BM25, keyword, the MCP and CLI
//! search through them), the PostgreSQL team search's query side and the vector cache's text go
//! through it, so a memory and a query in the same language always meet.
//!
//! **Normalisation**: Unicode NFKC (full-width Latin and half-width Katakana fold to their usual
//! forms, ligatures split), then lowercase.
//!
//! **Tokens**: text is cut into runs of one script class ([`Script`]).
//! - Words of scripts written with spaces (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari,
//!   ...; digits join the word) are whole tokens. Stop words and a Snowball stemmer are chosen
//!   per token by its script: Russian for Cyrillic, Greek, Arabic; other scripts are kept as
//!   written. Latin words take those of the text's [`Language`] (below). A Latin language's
//!   rules never touch another script.
//! - Han and Kana (Chinese, Japanese), which have no spaces, become overlapping character
//!   bigrams (a run of one character stays a unigram), as Lucene's CJK analyzer does: R@5 99.4
//!   on CMRC 2018 with the default BM25, against 99.6 for a plain character-bigram BM25 (see
//!   `docs/recall-evaluation.md`); no dictionary needed.
//! - Hangul words are kept whole *and* as character bigrams, so a particle glued to a noun
//!   (`캐시는`) still shares the noun's term (`캐시`).
//! - Thai (no spaces) becomes character bigrams like Han.
//!
//! Combining marks stay in their word, except that **accents fold**, so a word typed without
//! them meets the word written with them:
//! - a Latin-script word's stem loses the marks on its letters (`Zürich` is `zurich`,
//!   `contraseñas` stems to `contrasen`; `ø`, `ł`, `ß` and `đ` do not decompose and stay).
//!   Folding follows stemming, so accented suffixes (Hungarian `-ból`) are still removed;
//! - a word with accents also yields the stem of its folded spelling when that differs, which
//!   is what the word typed without them stems to (`almacén` → `almacen` and `almac`, and
//!   `almacen` → `almac`; French `annulée` → `annul` and `annule`);
//! - a Cyrillic `ё` is `е` (`ёлка` is `елка`);
//! - stop words are recognised with or without their accents.
//!
//! Other scripts keep every mark.
//!
//! **Latin-script languages**: English, Spanish, Portuguese, German, French, Italian, Dutch,
//! Swedish, Norwegian, Danish, Finnish, Hungarian, Romanian and Turkish have their own Snowball
//! stemmer and stop words (the Snowball lists; Romanian has no list, English keeps the project's
//! short one). [`detect_language`] decides a text's language from its Latin words alone (so the
//! English name in a German sentence or the Latin words of a Chinese note do not drag it
//! elsewhere): a trigram model (`whatlang`, restricted to these languages) when it is confident,
//! else the language with clearly the most stop words, else English. Fewer than three Latin
//! words are English. [`Analyzer::with_language`] fixes the language instead.
//!
//! Queries are short and the detector cannot place most of them, so a query is never analysed
//! in a guessed language: each memory is analysed once in its own language, and a query is
//! analysed again in each language the memories have ([`Analyzer::terms_in`]) and compared with
//! the memories of that language only. A query word and a memory word meet exactly when the
//! memory's stemmer maps both to one stem; a wrong detection costs only stemming quality
//! (English-stemmed German), never a match. Memories in English only (the common case) cost one
//! analysis of the query, as before. Measured on LoCoMo and CMRC 2018: every BM25 figure unchanged
//! (see `docs/recall-evaluation.md`).

use rust_stemmers::{Algorithm, Stemmer};
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::OnceLock;
use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

/// Common English function words that carry no topic. Our own list: short on purpose, so that
/// content words such as "first" or "new" still count.
const ENGLISH_STOP_WORDS: &[&str] = &[
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

/// Common Russian function words (pronouns, prepositions, conjunctions, particles, forms of
/// "to be"). Our own list, short like the English one.
const RUSSIAN_STOP_WORDS: &[&str] = &[
    "а",
    "без",
    "бы",
    "был",
    "была",
    "были",
    "было",
    "быть",
    "в",
    "вам",
    "вас",
    "весь",
    "во",
    "вот",
    "все",
    "всё",
    "всех",
    "вы",
    "где",
    "да",
    "для",
    "до",
    "его",
    "её",
    "ее",
    "если",
    "есть",
    "ещё",
    "еще",
    "же",
    "за",
    "здесь",
    "и",
    "из",
    "или",
    "им",
    "их",
    "к",
    "как",
    "когда",
    "кто",
    "ли",
    "мне",
    "мы",
    "на",
    "над",
    "нам",
    "нас",
    "не",
    "него",
    "неё",
    "нет",
    "ни",
    "но",
    "о",
    "об",
    "он",
    "она",
    "они",
    "оно",
    "от",
    "по",
    "под",
    "при",
    "с",
    "со",
    "так",
    "также",
    "там",
    "то",
    "тоже",
    "только",
    "ты",
    "у",
    "уже",
    "чем",
    "что",
    "чтобы",
    "эта",
    "эти",
    "это",
    "этот",
    "я",
];

fn stop_words(script: Script) -> Option<&'static HashSet<Cow<'static, str>>> {
    match script {
        Script::Latin => Some(Language::English.stop_words()),
        Script::Cyrillic => Some(russian_stop_words()),
        _ => None,
    }
}

/// The Russian stop words, each also with `ё` written `е` (`её` and `ее`).
fn russian_stop_words() -> &'static HashSet<Cow<'static, str>> {
    static RU: OnceLock<HashSet<Cow<'static, str>>> = OnceLock::new();
    RU.get_or_init(|| {
        let yo = RUSSIAN_STOP_WORDS
            .iter()
            .map(|w| Cow::Owned(unify_yo((*w).to_owned(), Script::Cyrillic)));
        RUSSIAN_STOP_WORDS
            .iter()
            .map(|w| Cow::Borrowed(*w))
            .chain(yo)
            .collect()
    })
}

/// The language of a text's Latin-script words: it picks their stop words and Snowball stemmer.
/// English is the default; the others are detected per memory (see [`detect_language`]) or set
/// by an override ([`Analyzer::with_language`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Language {
    /// English (the project's own short stop-word list).
    English,
    /// Spanish.
    Spanish,
    /// Portuguese.
    Portuguese,
    /// German.
    German,
    /// French.
    French,
    /// Italian.
    Italian,
    /// Dutch.
    Dutch,
    /// Swedish.
    Swedish,
    /// Norwegian (Bokmål).
    Norwegian,
    /// Danish.
    Danish,
    /// Finnish.
    Finnish,
    /// Hungarian.
    Hungarian,
    /// Romanian (stemmer only: no stop-word list).
    Romanian,
    /// Turkish.
    Turkish,
}

/// A language name or code [`Language::from_str`](std::str::FromStr) does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown language {0:?}: expected one of en, es, pt, de, fr, it, nl, sv, no, da, fi, hu, ro, tr (or the English name)"
)]
pub struct UnknownLanguage(pub String);

// The stop-word lists of the Snowball project (https://snowballstem.org, BSD licence), as
// PostgreSQL ships them in `tsearch_data/*.stop`; Romanian has none there.
const SPANISH_STOP_WORDS: &str = include_str!("stop_words/spanish.txt");
const PORTUGUESE_STOP_WORDS: &str = include_str!("stop_words/portuguese.txt");
const GERMAN_STOP_WORDS: &str = include_str!("stop_words/german.txt");
const FRENCH_STOP_WORDS: &str = include_str!("stop_words/french.txt");
const ITALIAN_STOP_WORDS: &str = include_str!("stop_words/italian.txt");
const DUTCH_STOP_WORDS: &str = include_str!("stop_words/dutch.txt");
const SWEDISH_STOP_WORDS: &str = include_str!("stop_words/swedish.txt");
const NORWEGIAN_STOP_WORDS: &str = include_str!("stop_words/norwegian.txt");
const DANISH_STOP_WORDS: &str = include_str!("stop_words/danish.txt");
const FINNISH_STOP_WORDS: &str = include_str!("stop_words/finnish.txt");
const HUNGARIAN_STOP_WORDS: &str = include_str!("stop_words/hungarian.txt");
const TURKISH_STOP_WORDS: &str = include_str!("stop_words/turkish.txt");

impl Language {
    /// Every language, English first.
    pub const ALL: [Language; 14] = [
        Language::English,
        Language::Spanish,
        Language::Portuguese,
        Language::German,
        Language::French,
        Language::Italian,
        Language::Dutch,
        Language::Swedish,
        Language::Norwegian,
        Language::Danish,
        Language::Finnish,
        Language::Hungarian,
        Language::Romanian,
        Language::Turkish,
    ];

    /// The ISO 639-1 code (`en`, `es`, `de`, ...).
    pub fn code(self) -> &'static str {
        match self {
            Language::English => "en",
            Language::Spanish => "es",
            Language::Portuguese => "pt",
            Language::German => "de",
            Language::French => "fr",
            Language::Italian => "it",
            Language::Dutch => "nl",
            Language::Swedish => "sv",
            Language::Norwegian => "no",
            Language::Danish => "da",
            Language::Finnish => "fi",
            Language::Hungarian => "hu",
            Language::Romanian => "ro",
            Language::Turkish => "tr",
        }
    }

    /// The position in [`Language::ALL`] (per-language tables).
    pub fn index(self) -> usize {
        self as usize
    }

    fn algorithm(self) -> Algorithm {
        match self {
            Language::English => Algorithm::English,
            Language::Spanish => Algorithm::Spanish,
            Language::Portuguese => Algorithm::Portuguese,
            Language::German => Algorithm::German,
            Language::French => Algorithm::French,
            Language::Italian => Algorithm::Italian,
            Language::Dutch => Algorithm::Dutch,
            Language::Swedish => Algorithm::Swedish,
            Language::Norwegian => Algorithm::Norwegian,
            Language::Danish => Algorithm::Danish,
            Language::Finnish => Algorithm::Finnish,
            Language::Hungarian => Algorithm::Hungarian,
            Language::Romanian => Algorithm::Romanian,
            Language::Turkish => Algorithm::Turkish,
        }
    }

    fn whatlang(self) -> whatlang::Lang {
        use whatlang::Lang;
        match self {
            Language::English => Lang::Eng,
            Language::Spanish => Lang::Spa,
            Language::Portuguese => Lang::Por,
            Language::German => Lang::Deu,
            Language::French => Lang::Fra,
            Language::Italian => Lang::Ita,
            Language::Dutch => Lang::Nld,
            Language::Swedish => Lang::Swe,
            Language::Norwegian => Lang::Nob,
            Language::Danish => Lang::Dan,
            Language::Finnish => Lang::Fin,
            Language::Hungarian => Lang::Hun,
            Language::Romanian => Lang::Ron,
            Language::Turkish => Lang::Tur,
        }
    }

    fn stop_word_text(self) -> &'static str {
        match self {
            Language::English | Language::Romanian => "",
            Language::Spanish => SPANISH_STOP_WORDS,
            Language::Portuguese => PORTUGUESE_STOP_WORDS,
            Language::German => GERMAN_STOP_WORDS,
            Language::French => FRENCH_STOP_WORDS,
            Language::Italian => ITALIAN_STOP_WORDS,
            Language::Dutch => DUTCH_STOP_WORDS,
            Language::Swedish => SWEDISH_STOP_WORDS,
            Language::Norwegian => NORWEGIAN_STOP_WORDS,
            Language::Danish => DANISH_STOP_WORDS,
            Language::Finnish => FINNISH_STOP_WORDS,
            Language::Hungarian => HUNGARIAN_STOP_WORDS,
            Language::Turkish => TURKISH_STOP_WORDS,
        }
    }

    /// The language's stop words, normalised like every token (see [`normalize`]), each also
    /// without its accents (`à` and `a`, `für` and `fur`): a stop word typed without them is
    /// still one.
    fn stop_words(self) -> &'static HashSet<Cow<'static, str>> {
        static SETS: OnceLock<Vec<HashSet<Cow<'static, str>>>> = OnceLock::new();
        let sets = SETS.get_or_init(|| {
            Language::ALL
                .iter()
                .map(|l| {
                    let words: Vec<&'static str> = match l {
                        Language::English => ENGLISH_STOP_WORDS.to_vec(),
                        _ => l
                            .stop_word_text()
                            .lines()
                            .map(str::trim)
                            .filter(|w| !w.is_empty())
                            .collect(),
                    };
                    let folded = words
                        .iter()
                        .map(|w| fold((*w).to_owned(), Script::Latin))
                        .map(Cow::Owned);
                    words
                        .iter()
                        .map(|w| Cow::Borrowed(*w))
                        .chain(folded)
                        .collect()
                })
                .collect()
        });
        // `sets` has one set per language, in `ALL` order.
        &sets[self.index()]
    }

    /// Whether `word` (normalised, see [`normalize`]) is one of this language's stop words.
    ///
    /// ```
    /// use memloop_text::Language;
    /// assert!(Language::German.is_stop_word("die") && !Language::English.is_stop_word("die"));
    /// assert!(Language::Spanish.is_stop_word("de") && !Language::Spanish.is_stop_word("datos"));
    /// ```
    pub fn is_stop_word(self, word: &str) -> bool {
        self.stop_words().contains(word)
    }
}

impl std::fmt::Display for Language {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

impl std::str::FromStr for Language {
    type Err = UnknownLanguage;

    /// An ISO 639-1 code (`de`) or the English name (`German`), any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        Language::ALL
            .into_iter()
            .find(|l| l.code() == lower || format!("{l:?}").eq_ignore_ascii_case(&lower))
            .or_else(|| (lower == "nb").then_some(Language::Norwegian))
            .ok_or_else(|| UnknownLanguage(s.to_owned()))
    }
}

/// The language of the Latin-script words of `text` (other scripts, and words with digits, are
/// ignored, so the English and German words of a Chinese note are judged alone), or `None` when they are too few or too
/// ambiguous to say: the caller then treats them as English.
///
/// Two votes: a trigram model (`whatlang`, restricted to the languages with a stemmer) and the
/// count of each language's stop words among the words. A confident trigram guess wins unless
/// English has at least as many stop words in the text (then it is English: the model mistakes
/// short English sentences for Danish or Dutch); an unsure one leaves the decision to the
/// language with clearly the most stop words; else `None`. See [`Analyzer`] for why a wrong guess
/// costs only stemming quality, never a match between a query and a memory.
///
/// ```
/// use memloop_text::{Language, detect_language};
/// let es = "Guardamos las contraseñas de los usuarios en la base de datos cifrada";
/// assert_eq!(detect_language(es), Some(Language::Spanish));
/// assert_eq!(detect_language("我们决定使用PostgreSQL作为主数据库"), None);
/// ```
pub fn detect_language(text: &str) -> Option<Language> {
    let words: Vec<String> = tokens(text)
        .into_iter()
        // Words of letters only: identifiers, versions and hashes say nothing of the language.
        .filter(|(w, s)| *s == Script::Latin && w.chars().all(char::is_alphabetic))
        .map(|(w, _)| w)
        .take(MAX_DETECT_WORDS)
        .collect();
    detect_words(&words)
}

/// [`detect_language`] over normalised Latin words.
fn detect_words(words: &[String]) -> Option<Language> {
    let letters: usize = words.iter().map(|w| w.chars().count()).sum();
    if words.len() < MIN_DETECT_WORDS || letters < MIN_DETECT_LETTERS {
        return None;
    }
    let mut votes = [0usize; Language::ALL.len()];
    for w in words {
        for l in Language::ALL {
            if l.is_stop_word(w) {
                votes[l.index()] += 1;
            }
        }
    }
    if english_decides(&votes) {
        // Whatever the trigram model said, `decide` would answer English: skip the model (the
        // largest cost of indexing a changed English memory).
        return Some(Language::English);
    }
    let info = detector().detect(&words.join(" "));
    let guess = info
        .as_ref()
        .and_then(|i| Language::ALL.into_iter().find(|l| l.whatlang() == i.lang()));
    let confidence = info.as_ref().map_or(0.0, whatlang::Info::confidence);
    tracing::trace!(?guess, confidence, ?votes, "language of latin words");
    decide(&votes, guess, confidence)
}

/// Whether English stop words alone settle the language: English has the most of them (ties
/// included) and enough to decide. Then [`decide`] answers English whatever the trigram guess,
/// since another language must have more stop words than English to win.
fn english_decides(votes: &[usize; Language::ALL.len()]) -> bool {
    let english = votes[Language::English.index()];
    english >= MIN_STOP_VOTES && votes.iter().all(|&v| v <= english)
}

/// The language from the stop-word `votes` and the trigram model's `guess` with its
/// `confidence` (see [`detect_language`]).
fn decide(
    votes: &[usize; Language::ALL.len()],
    guess: Option<Language>,
    confidence: f64,
) -> Option<Language> {
    let english = votes[Language::English.index()];
    if let Some(g) = guess.filter(|_| confidence >= DETECT_CONFIDENCE) {
        // English text with a few foreign-looking trigrams ("Tim prepares for exams at school"
        // looks Danish): another language must also have more of its stop words than English.
        if g == Language::English || english == 0 || votes[g.index()] > english {
            return Some(g);
        }
    }
    // Unsure trigrams: the language with the most stop words, if it is clear.
    let best = votes.iter().copied().max().unwrap_or(0);
    if best < MIN_STOP_VOTES {
        return None;
    }
    // A tie with English is English; a tie between others goes to the trigram guess if it is
    // one of them.
    if english == best {
        return Some(Language::English);
    }
    let mut tied = Language::ALL
        .into_iter()
        .filter(|l| votes[l.index()] == best);
    match (tied.next(), tied.next()) {
        (Some(only), None) => Some(only),
        _ => guess.filter(|g| votes[g.index()] == best),
    }
}

/// Fewer Latin words (or letters) than this: too little to tell, English.
const MIN_DETECT_WORDS: usize = 3;
const MIN_DETECT_LETTERS: usize = 12;
/// Words read at most: a long memory is judged by its beginning.
const MAX_DETECT_WORDS: usize = 300;
/// The trigram model's confidence that is enough on its own.
const DETECT_CONFIDENCE: f64 = 0.5;
/// Stop words of one language it takes to decide when the trigram model is unsure.
const MIN_STOP_VOTES: usize = 2;

fn detector() -> &'static whatlang::Detector {
    static DETECTOR: OnceLock<whatlang::Detector> = OnceLock::new();
    DETECTOR.get_or_init(|| {
        whatlang::Detector::with_allowlist(Language::ALL.iter().map(|l| l.whatlang()).collect())
    })
}

/// The script class of a token, which decides how it is analysed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Script {
    /// Latin letters (and words of digits only): English stop words and stemming.
    Latin,
    /// Cyrillic: Russian stop words and stemming.
    Cyrillic,
    /// Greek: Greek stemming.
    Greek,
    /// Arabic: Arabic stemming.
    Arabic,
    /// Another script written with spaces (Hebrew, Devanagari, Armenian, ...): kept as written.
    OtherWord,
    /// Han ideographs and Japanese Kana: character bigrams.
    Cjk,
    /// Hangul: the word and its character bigrams.
    Hangul,
    /// Thai (and Lao, Khmer, Myanmar: no spaces either): character bigrams.
    Thai,
}

/// The coarse class of one character: which run it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Word,
    Cjk,
    Hangul,
    Thai,
    Mark,
    Break,
}

fn class(c: char) -> Class {
    let u = c as u32;
    if c.is_ascii() {
        return if c.is_ascii_alphanumeric() {
            Class::Word
        } else {
            Class::Break
        };
    }
    match u {
        0x3040..=0x30FF | 0x31F0..=0x31FF | 0x3005 | 0x3006 | 0x3007 | 0x303B => Class::Cjk,
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3FFFF => Class::Cjk,
        0xFF66..=0xFF9F => Class::Cjk,
        0x1100..=0x11FF | 0x3130..=0x318F | 0xA960..=0xA97F | 0xAC00..=0xD7FF => Class::Hangul,
        0x0E00..=0x0EFF | 0x1000..=0x109F | 0x1780..=0x17FF => Class::Thai,
        _ if c.is_alphanumeric() => Class::Word,
        _ => match get_general_category(c) {
            GeneralCategory::NonspacingMark
            | GeneralCategory::SpacingMark
            | GeneralCategory::EnclosingMark => Class::Mark,
            _ => Class::Break,
        },
    }
}

/// The script of a word-class token: by its first letter that says (digits say nothing).
fn word_script(word: &str) -> Script {
    for c in word.chars() {
        match c as u32 {
            0x30..=0x39 => continue,
            0x00..=0x024F | 0x1E00..=0x1EFF => return Script::Latin,
            0x0370..=0x03FF | 0x1F00..=0x1FFF => return Script::Greek,
            0x0400..=0x052F | 0x1C80..=0x1C8F | 0x2DE0..=0x2DFF | 0xA640..=0xA69F => {
                return Script::Cyrillic;
            }
            0x0600..=0x06FF
            | 0x0750..=0x077F
            | 0x08A0..=0x08FF
            | 0xFB50..=0xFDFF
            | 0xFE70..=0xFEFF => return Script::Arabic,
            _ => match class(c) {
                Class::Cjk => return Script::Cjk,
                Class::Hangul => return Script::Hangul,
                Class::Thai => return Script::Thai,
                _ => return Script::OtherWord,
            },
        }
    }
    Script::Latin
}

/// Unicode NFKC of `text` (full-width Latin and digits, half-width Katakana and ligatures
/// folded; case kept): the form the vector cache embeds.
pub fn nfkc(text: &str) -> Cow<'_, str> {
    if text.is_ascii() || is_nfkc_quick(text.chars()) == IsNormalized::Yes {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.nfkc().collect())
    }
}

/// NFKC, then lowercase: the form every memory and every query is analysed in. ASCII text is
/// only lowercased (it is already NFKC).
///
/// ```
/// use memloop_text::normalize;
/// assert_eq!(normalize("ＰｏｓｔｇｒｅＳＱＬ ｶﾀｶﾅ"), "postgresql カタカナ");
/// ```
pub fn normalize(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            return Cow::Owned(text.to_ascii_lowercase());
        }
        return Cow::Borrowed(text);
    }
    let folded = nfkc(text);
    if folded.chars().any(char::is_uppercase) {
        Cow::Owned(folded.to_lowercase())
    } else {
        folded
    }
}

/// The tokens of `text` after [`normalize`], in order: each a run of one script class (see the
/// module docs), with its [`Script`]. No stop words are removed and nothing is stemmed or split
/// into n-grams here.
///
/// ```
/// use memloop_text::{Script, tokens};
/// let t = tokens("我们决定使用PostgreSQL作为主数据库");
/// assert_eq!(t[1], ("postgresql".to_owned(), Script::Latin));
/// assert_eq!(t[2], ("作为主数据库".to_owned(), Script::Cjk));
/// ```
pub fn tokens(text: &str) -> Vec<(String, Script)> {
    let text = normalize(text);
    let mut out: Vec<(String, Script)> = Vec::new();
    let mut cur = String::new();
    let mut cur_class = Class::Break;
    let flush = |cur: &mut String, out: &mut Vec<(String, Script)>| {
        if !cur.is_empty() {
            let word = std::mem::take(cur);
            let script = word_script(&word);
            out.push((word, script));
        }
    };
    for c in text.chars() {
        let k = class(c);
        match k {
            Class::Break => {
                flush(&mut cur, &mut out);
                cur_class = Class::Break;
            }
            // A combining mark stays with the letter before it; alone it is dropped.
            Class::Mark => {
                if !cur.is_empty() {
                    cur.push(c);
                }
            }
            _ => {
                if k != cur_class {
                    flush(&mut cur, &mut out);
                    cur_class = k;
                }
                cur.push(c);
            }
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// The normalised words of `text` in order (see [`tokens`]): runs of one script, so a Chinese
/// sentence with an English name in it is three words, not one (apostrophes split words:
/// `Melanie's` → `melanie`, `s`).
pub fn words(text: &str) -> impl Iterator<Item = String> {
    tokens(text).into_iter().map(|(w, _)| w)
}

/// The separator of a pair term (`run_test`): never part of a token, so pair terms and single
/// terms cannot collide.
const PAIR: char = '_';

/// Turns text into index terms: [`tokens`] (normalised, one script per token), stop words
/// removed and stemmed by the token's language, Han/Kana/Thai as character bigrams, Hangul as
/// the word plus its bigrams; optionally adjacent-word pairs (`a_b`, over the stemmed,
/// stop-word-free words; n-grams make no pairs).
///
/// Latin-script words take the stop words and stemmer of the text's [`Language`]: the override
/// ([`Analyzer::with_language`]) or else the detected one ([`detect_language`], English when
/// unsure). A memory is analysed once in its language; a query is analysed *in the language of
/// each memory it is compared with* ([`Analyzer::terms_in`]), so a query word meets a memory
/// word exactly when one stemmer maps both to the same stem, however short the query and
/// whatever the detector said.
pub struct Analyzer {
    latin: Vec<Stemmer>,
    russian: Stemmer,
    greek: Stemmer,
    arabic: Stemmer,
    bigrams: bool,
    language: Option<Language>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("bigrams", &self.bigrams)
            .field("language", &self.language)
            .finish_non_exhaustive()
    }
}

/// The analysed terms of one text: single terms (words and n-grams), then the pair terms.
#[derive(Debug, Default)]
pub struct Terms {
    /// Words (stemmed) and character n-grams, in order.
    pub single: Vec<String>,
    /// Adjacent-word pairs (empty unless the analyzer makes them).
    pub pairs: Vec<String>,
}

/// A Cyrillic word with `ё` written `е`, as most Russian text writes it: `ёлка` and `елка` are
/// one word (the Snowball Russian stemmer expects the replacement done before it).
fn unify_yo(word: String, script: Script) -> String {
    if script == Script::Cyrillic && word.contains('ё') {
        word.replace('ё', "е")
    } else {
        word
    }
}

/// A Latin-script term without its diacritics (canonical decomposition, combining marks
/// dropped, recomposed), so a word typed without accents meets the word written with them:
/// `zürich`/`zurich`, `café`/`cafe`, `contraseña`/`contrasena`, Vietnamese `mã`/`ma`. Letters
/// that do not decompose keep their form (`ø`, `ł`, `ß`, `đ`, `ı`). Applied to the stem
/// (Hungarian, Finnish, Turkish and Romanian suffixes carry accents, `-ból`, `-ről`, `-llä`, and
/// a stemmer fed folded words would stop removing them), and the analyzer adds the stem of the
/// folded word when it differs (see [`Analyzer::terms`]).
fn fold(word: String, script: Script) -> String {
    if script != Script::Latin || word.is_ascii() {
        return word;
    }
    let folded: String = fold_with_offsets(&word).0.nfc().collect();
    if folded.is_empty() { word } else { folded }
}

/// A token (from [`tokens`]) folded as the analyzer folds its terms: a Latin-script word loses
/// its diacritics (`zürich` → `zurich`, `máy` → `may`; `ø`, `ł`, `ß`, `đ` stay), Cyrillic `ё` is
/// `е`, and words of other scripts are unchanged. For a search index built elsewhere (the
/// PostgreSQL team store folds its text the same way in SQL) to meet the analyzer's queries.
///
/// ```
/// use memloop_text::fold_accents;
/// assert_eq!(fold_accents("çarşamba"), "carsamba");
/// assert_eq!(fold_accents("dữ"), "du");
/// assert_eq!(fold_accents("ёлка"), "елка");
/// assert_eq!(fold_accents("łódź"), "łodz");
/// assert_eq!(fold_accents("नमस्ते"), "नमस्ते");
/// assert_eq!(fold_accents(""), "");
/// ```
pub fn fold_accents(token: &str) -> String {
    let script = word_script(token);
    fold(unify_yo(token.to_owned(), script), script)
}

/// `text` with the accents of its Latin letters removed (decomposed, not recomposed; only marks
/// on a Latin letter go, so a token that runs on into another script keeps that script's vowel
/// signs), and for each byte of the result the byte offset in `text` of the character it came
/// from: a token's fold recomposes it, transcript search places snippets with the offsets.
pub fn fold_with_offsets(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut from = Vec::with_capacity(text.len());
    let mut on_latin = false;
    for (i, c) in text.char_indices() {
        for d in std::iter::once(c).nfd() {
            if get_general_category(d) == GeneralCategory::NonspacingMark {
                if on_latin {
                    continue;
                }
            } else {
                on_latin = matches!(d as u32, 0x00..=0x024F | 0x1E00..=0x1EFF);
            }
            out.push(d);
            from.extend(std::iter::repeat_n(i, d.len_utf8()));
        }
    }
    (out, from)
}

/// Overlapping character bigrams of `run`; a one-character run is its own term.
fn char_bigrams(run: &str, out: &mut Vec<String>) {
    let chars: Vec<char> = run.chars().collect();
    if chars.len() == 1 {
        out.push(run.to_owned());
        return;
    }
    for w in chars.windows(2) {
        out.push(w.iter().collect());
    }
}

impl Analyzer {
    /// An analyzer for every script; `bigrams` adds adjacent-word pair terms. The language of
    /// Latin-script words is detected per text.
    pub fn new(bigrams: bool) -> Self {
        Self {
            latin: Language::ALL
                .iter()
                .map(|l| Stemmer::create(l.algorithm()))
                .collect(),
            russian: Stemmer::create(Algorithm::Russian),
            greek: Stemmer::create(Algorithm::Greek),
            arabic: Stemmer::create(Algorithm::Arabic),
            bigrams,
            language: None,
        }
    }

    /// The same analyzer with the language of Latin-script words fixed (`Some`), or detected per
    /// text (`None`, the default).
    ///
    /// ```
    /// use memloop_text::{Analyzer, Language};
    /// let de = Analyzer::new(false).with_language(Some(Language::German));
    /// assert_eq!(de.terms("Datenbanken"), de.terms("Datenbank"));
    /// ```
    #[must_use]
    pub fn with_language(mut self, language: Option<Language>) -> Self {
        self.language = language;
        self
    }

    /// The override, if any.
    pub fn language(&self) -> Option<Language> {
        self.language
    }

    /// The language `text`'s Latin-script words are analysed in by [`Self::terms`]: the
    /// override, else the detected language, else English.
    pub fn language_of(&self, text: &str) -> Language {
        self.language
            .or_else(|| detect_language(text))
            .unwrap_or(Language::English)
    }

    fn stem(&self, word: String, script: Script, language: Language) -> String {
        let stemmer = match script {
            Script::Latin => match self.latin.get(language.index()) {
                Some(s) => s,
                None => return word,
            },
            Script::Cyrillic => &self.russian,
            Script::Greek => &self.greek,
            Script::Arabic => &self.arabic,
            _ => return word,
        };
        match stemmer.stem(&word) {
            Cow::Borrowed(s) if s.len() == word.len() => word,
            stemmed => stemmed.into_owned(),
        }
    }

    /// The terms of `text` with its Latin-script words in `language`.
    pub fn analyze_in(&self, text: &str, language: Language) -> Terms {
        self.analyze_tokens(tokens(text), language)
    }

    /// The terms of `tokens` (see [`tokens`]) with Latin-script words in `language`.
    pub fn analyze_tokens(&self, tokens: Vec<(String, Script)>, language: Language) -> Terms {
        let mut single = Vec::new();
        let mut pairs = Vec::new();
        let mut prev_word: Option<usize> = None;
        for (token, script) in tokens {
            match script {
                Script::Cjk | Script::Thai => {
                    char_bigrams(&token, &mut single);
                    prev_word = None;
                }
                _ => {
                    let stop = match script {
                        Script::Latin => language.is_stop_word(&token),
                        _ => stop_words(script).is_some_and(|set| set.contains(token.as_str())),
                    };
                    if stop {
                        continue;
                    }
                    let hangul_grams = script == Script::Hangul && token.chars().count() > 2;
                    let grams_of = hangul_grams.then(|| token.clone());
                    let token = unify_yo(token, script);
                    // The stem of the word without its accents too, when that differs: what
                    // the word typed without them stems to (`almacen` → `almac`, while
                    // `almacén` stems to itself and folds to `almacen`).
                    let plain = (script == Script::Latin && !token.is_ascii())
                        .then(|| self.stem(fold(token.clone(), script), script, language));
                    let word = fold(self.stem(token, script, language), script);
                    if let Some(p) = prev_word.filter(|_| self.bigrams) {
                        pairs.push(format!("{}{PAIR}{word}", single[p]));
                    }
                    prev_word = Some(single.len());
                    let plain = plain.filter(|p| *p != word);
                    single.push(word);
                    single.extend(plain);
                    if let Some(run) = grams_of {
                        char_bigrams(&run, &mut single);
                    }
                }
            }
        }
        Terms { single, pairs }
    }

    /// The terms of `text` in its own language ([`Self::language_of`]).
    pub fn analyze(&self, text: &str) -> Terms {
        self.analyze_in(text, self.language_of(text))
    }

    /// The single terms of `text` (stemmed words and character n-grams), in order, stop words
    /// removed; Latin-script words in the text's own language ([`Self::language_of`]).
    pub fn unigrams(&self, text: &str) -> Vec<String> {
        self.analyze(text).single
    }

    /// [`Self::unigrams`] with Latin-script words in `language`.
    pub fn unigrams_in(&self, text: &str, language: Language) -> Vec<String> {
        self.analyze_in(text, language).single
    }

    /// Single terms, then adjacent-word pairs when enabled; Latin-script words in the text's own
    /// language ([`Self::language_of`]), their accents folded (a word with accents is followed
    /// by the stem of its folded spelling when that differs; see the module docs).
    ///
    /// ```
    /// use memloop_text::Analyzer;
    /// let a = Analyzer::new(true);
    /// assert_eq!(a.terms("The running tests"), vec!["run", "test", "run_test"]);
    /// assert_eq!(a.terms("主数据库"), vec!["主数", "数据", "据库"]);
    /// assert_eq!(a.terms("Базы данных"), vec!["баз", "дан", "баз_дан"]);
    /// assert_eq!(a.terms("las contraseñas de los usuarios"), vec!["contrasen", "usuari", "contrasen_usuari"]);
    /// assert_eq!(a.terms("las contrasenas"), a.terms("las contraseñas")); // accents fold
    /// ```
    pub fn terms(&self, text: &str) -> Vec<String> {
        let Terms { mut single, pairs } = self.analyze(text);
        single.extend(pairs);
        single
    }

    /// [`Self::terms`] with Latin-script words in `language`: a query compared with a memory
    /// analysed in `language`.
    ///
    /// ```
    /// use memloop_text::{Analyzer, Language};
    /// let a = Analyzer::new(false);
    /// assert_eq!(a.terms_in("contraseña", Language::Spanish), vec!["contrasen"]);
    /// assert_eq!(a.terms_in("die Datenbanken", Language::German), vec!["datenbank"]);
    /// assert_eq!(a.terms_in("die Datenbanken", Language::English), vec!["die", "datenbanken"]);
    /// ```
    pub fn terms_in(&self, text: &str, language: Language) -> Vec<String> {
        let Terms { mut single, pairs } = self.analyze_in(text, language);
        single.extend(pairs);
        single
    }
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
        assert_eq!(a.terms("Café déjà-vu"), vec!["cafe", "deja", "vu"]);
        assert_eq!(
            a.terms("Straße Łódź Ørsted đường"),
            vec!["straße", "łodz", "ørsted", "đuong"]
        );
    }

    /// A word typed without its accents (or `е` for `ё`) is the word written with them, in
    /// every Latin-script language and in Russian: each term of the plain spelling is a term of
    /// the accented one (a plain spelling may also be a stop word, as Vietnamese `may` is in
    /// English). Other scripts keep their marks.
    #[test]
    fn accents_and_yo_do_not_separate_words() {
        let a = Analyzer::new(false);
        let same = |with: &str, without: &str| {
            let lang = a.language_of(with);
            let accented = a.terms_in(with, lang);
            let plain = a.terms_in(without, lang);
            assert!(!plain.is_empty(), "{without}");
            assert!(
                plain.iter().all(|t| accented.contains(t)),
                "{with} {accented:?} / {without} {plain:?}"
            );
        };
        same(
            "Die Besprechung findet in Zürich statt",
            "Die Besprechung findet in Zurich statt",
        );
        same(
            "la réunion de Genève est annulée à cause de la grève",
            "la reunion de Geneve est annulee a cause de la greve",
        );
        same(
            "las contraseñas se guardan en el almacén",
            "las contrasenas se guardan en el almacen",
        );
        same(
            "Toplantı İstanbul'da, çarşamba günü",
            "Toplantı İstanbul'da, carsamba gunu",
        );
        same("Máy chủ cơ sở dữ liệu", "May chu co so du lieu");
        same(
            "Новогодняя ёлка стоит в офисе",
            "Новогодняя елка стоит в офисе",
        );
        assert_eq!(a.terms("ёжик"), a.terms("ежик"));
        // Accented suffixes are still removed: folding follows stemming.
        let hu = |text: &str| a.terms_in(text, Language::Hungarian);
        assert_eq!(hu("adatbázisból")[0], hu("adatbázis")[0]);
        assert_eq!(hu("a szerverről")[0], hu("a szerver")[0]);
        assert_eq!(hu("adatbázisból")[0], hu("adatbazis")[0]);
        let fi = |text: &str| a.terms_in(text, Language::Finnish);
        assert_eq!(fi("käyttäjällä")[0], fi("kayttaja")[0]);
        // Devanagari keeps its vowel signs, even glued to a Latin word.
        assert_eq!(a.terms("डेटाबेस"), vec!["डेटाबेस"]);
        assert_ne!(a.terms("डेटाबेस"), a.terms("डटबस"));
        assert_eq!(a.terms("dbडेटा"), vec!["dbडेटा"]);
    }

    #[test]
    fn english_stop_words_settle_what_the_trigram_model_would_not_change() {
        // Every vote count where English leads (ties included) with enough stop words, against
        // every trigram guess and confidence: the short cut and the full decision agree.
        let mut seed = 0x9e37_79b9_u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % n
        };
        let guesses: Vec<Option<Language>> = std::iter::once(None)
            .chain(Language::ALL.map(Some))
            .collect();
        let mut checked = 0;
        for _ in 0..5_000 {
            let mut votes = [0usize; Language::ALL.len()];
            // Small counts too, where the vote minimum matters.
            let top = 1 + next(5);
            votes.iter_mut().for_each(|v| *v = next(top + 1) as usize);
            if !english_decides(&votes) {
                continue;
            }
            for &guess in &guesses {
                for confidence in [0.0, 0.49, DETECT_CONFIDENCE, 1.0] {
                    assert_eq!(
                        decide(&votes, guess, confidence),
                        Some(Language::English),
                        "{votes:?} {guess:?} {confidence}"
                    );
                }
            }
            checked += 1;
        }
        assert!(
            checked > 100,
            "only {checked} English-led vote counts drawn"
        );
        // Short English that the trigram model takes for Danish stays English; a Spanish
        // sentence with one English-looking word is still Spanish.
        assert_eq!(
            detect_language("Tim prepares for the exams at his school"),
            Some(Language::English)
        );
        assert_eq!(
            detect_language("Los usuarios guardan las notas de la reunión en el wiki"),
            Some(Language::Spanish)
        );
    }

    #[test]
    fn nfkc_example() {
        assert_eq!(nfkc("ＡＰＩ ｶﾞｲﾄﾞ"), "API ガイド");
    }
}
