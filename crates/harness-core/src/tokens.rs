//! Token counting: the [`TokenCounter`] trait, tiktoken and chars/4 estimators, and the
//! conversation count rule with an incremental cache.
//!
//! The conversation's size is the provider usage reported on the newest assistant response plus
//! an estimate of every message after it (the estimate alone when no usage exists).
//! [`ConversationTokens`] caches per-message estimates and prefix sums, so that the per-turn check
//! costs O(new messages) while the conversation only grows, and falls back to a recount when the
//! history was rewritten (compaction).

use crate::message::{ContentBlock, Message, MessageId, Role, ToolResultContent};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Tokens charged for one image or document block.
pub const MEDIA_BLOCK_TOKENS: u64 = 2_000;

/// Counts tokens of text. Object-safe.
pub trait TokenCounter: Send + Sync {
    /// Tokens in `text`.
    fn count(&self, text: &str) -> u64;
}

/// The cheap estimator: about four bytes of text per token, rounded up, with characters of the
/// scripts tokenizers spend more on weighted up so that the estimate does not fall short of a
/// real BPE count in any language (measured against `cl100k_base`, the most expensive of the
/// common encodings for non-English text):
///
/// | characters | weight (bytes) | tokens per character: estimate / `cl100k_base` |
/// |---|---|---|
/// | ASCII | 1 | 0.25 / 0.20 (English) |
/// | Cyrillic | 2 (its UTF-8 length) | 0.50 / 0.40 (Russian) |
/// | Han, Kana, Hangul | 5 | 1.25 / 1.21 (Chinese), 1.05 (Japanese), 0.83-1.0 (Korean) |
/// | accented Latin | 6 | covers a Vietnamese test sentence (48 `cl100k_base` tokens) |
/// | Indic scripts (Devanagari to Sinhala) | 6 | covers a Hindi test sentence (60 `cl100k_base` tokens) |
/// | every other character of the BMP | 4 | 1.00 / 0.67-0.95 (Arabic), 0.77 (Thai) |
/// | emoji and the rest beyond the BMP | 10 | 2.50 / 2-3 |
///
/// ```
/// use memloop_core::tokens::{CharEstimator, TokenCounter};
/// assert_eq!(CharEstimator.count("abcdefgh"), 2);
/// assert_eq!(CharEstimator.count("abc"), 1);
/// assert_eq!(CharEstimator.count("数据库"), 4); // 3 × 5 bytes / 4, rounded up
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct CharEstimator;

/// The weight of `c` in [`CharEstimator`]'s bytes.
fn char_weight(c: char) -> u64 {
    match u32::from(c) {
        0..=0x7F => 1,
        // Cyrillic and its supplement: about as cheap as their two UTF-8 bytes.
        0x400..=0x52F => 2,
        // Accented Latin: a tokenizer splits the syllable around it (Vietnamese, most).
        0x80..=0x24F | 0x1E00..=0x1EFF => 6,
        // Indic scripts (Devanagari to Sinhala): about one token per character and mark.
        0x900..=0xDFF => 6,
        // Hiragana, Katakana, CJK unified ideographs (and extension A), compatibility
        // ideographs, half-width Katakana, ideographs beyond the BMP.
        0x3040..=0x30FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xF900..=0xFAFF
        | 0xFF66..=0xFF9F
        | 0x20000..=0x3FFFF => 5,
        // Hangul syllables and jamo.
        0xAC00..=0xD7AF | 0x1100..=0x11FF | 0x3130..=0x318F => 5,
        // Emoji and other characters beyond the BMP: two or three tokens each.
        _ if c.len_utf8() == 4 => 10,
        _ => 4,
    }
}

impl TokenCounter for CharEstimator {
    fn count(&self, text: &str) -> u64 {
        if text.is_ascii() {
            return (text.len() as u64).div_ceil(4);
        }
        text.chars().map(char_weight).sum::<u64>().div_ceil(4)
    }
}

/// Which tiktoken encoding to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `o200k_base` (GPT-4o family).
    O200kBase,
    /// `cl100k_base` (GPT-4 family).
    Cl100kBase,
}

/// A real BPE tokenizer (tiktoken-rs). The encoding tables load once per process.
#[derive(Clone)]
pub struct TiktokenCounter {
    bpe: Arc<tiktoken_rs::CoreBPE>,
}

impl std::fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TiktokenCounter")
    }
}

/// Errors building a tokenizer.
#[derive(Debug, thiserror::Error)]
#[error("cannot load tiktoken encoding: {0}")]
pub struct TokenizerError(String);

impl TiktokenCounter {
    /// Load (or reuse) the given encoding.
    ///
    /// ```
    /// use memloop_core::tokens::{Encoding, TiktokenCounter, TokenCounter};
    /// let t = TiktokenCounter::new(Encoding::Cl100kBase).unwrap();
    /// assert_eq!(t.count("hello world"), 2);
    /// ```
    pub fn new(encoding: Encoding) -> Result<Self, TokenizerError> {
        static O200K: OnceLock<Result<Arc<tiktoken_rs::CoreBPE>, String>> = OnceLock::new();
        static CL100K: OnceLock<Result<Arc<tiktoken_rs::CoreBPE>, String>> = OnceLock::new();
        let cell = match encoding {
            Encoding::O200kBase => O200K.get_or_init(|| {
                tiktoken_rs::o200k_base()
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            }),
            Encoding::Cl100kBase => CL100K.get_or_init(|| {
                tiktoken_rs::cl100k_base()
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            }),
        };
        match cell {
            Ok(bpe) => Ok(Self { bpe: bpe.clone() }),
            Err(e) => Err(TokenizerError(e.clone())),
        }
    }
}

impl TokenCounter for TiktokenCounter {
    fn count(&self, text: &str) -> u64 {
        self.bpe.encode_ordinary(text).len() as u64
    }
}

/// Estimated tokens of one message: text, tool-use name + JSON input, tool-result content,
/// thinking text; images and documents [`MEDIA_BLOCK_TOKENS`] each.
pub fn estimate_message(counter: &dyn TokenCounter, message: &Message) -> u64 {
    message
        .content
        .iter()
        .map(|b| estimate_block(counter, b))
        .sum()
}

fn estimate_block(counter: &dyn TokenCounter, block: &ContentBlock) -> u64 {
    match block {
        ContentBlock::Text { text } => counter.count(text),
        ContentBlock::ToolUse { name, input, .. } => {
            counter.count(name) + counter.count(&input.to_string())
        }
        ContentBlock::ToolResult { content, .. } => match content {
            ToolResultContent::Text(t) => counter.count(t),
            ToolResultContent::Blocks(blocks) => {
                blocks.iter().map(|b| estimate_block(counter, b)).sum()
            }
        },
        ContentBlock::Thinking { thinking, .. } => counter.count(thinking),
        // Opaque, and longer than the thinking it hides: counting it errs on the safe side.
        ContentBlock::RedactedThinking { data } => counter.count(data),
        ContentBlock::Image { .. } | ContentBlock::Document { .. } => MEDIA_BLOCK_TOKENS,
    }
}

/// Estimate of a whole slice, no usage, no cache.
pub fn estimate_messages(counter: &dyn TokenCounter, messages: &[Message]) -> u64 {
    messages.iter().map(|m| estimate_message(counter, m)).sum()
}

/// The conversation count rule without a cache: usage of the newest assistant
/// response that has one, plus an estimate of every message after it. An all-zero usage counts
/// as no usage (no provider reports an empty context).
pub fn count_conversation_uncached(counter: &dyn TokenCounter, messages: &[Message]) -> u64 {
    match newest_usage(messages) {
        Some((idx, used)) => used + estimate_messages(counter, &messages[idx + 1..]),
        None => estimate_messages(counter, messages),
    }
}

fn newest_usage(messages: &[Message]) -> Option<(usize, u64)> {
    messages.iter().enumerate().rev().find_map(|(i, m)| {
        m.usage
            .filter(|u| m.role == Role::Assistant && u.context_tokens() > 0)
            .map(|u| (i, u.context_tokens()))
    })
}

/// Incremental conversation token counter: per-message estimates are cached, so each check costs
/// O(new messages), not O(history).
///
/// ```
/// use memloop_core::{tokens::{CharEstimator, ConversationTokens}, message::{Message, Usage}};
/// let mut counter = ConversationTokens::new(std::sync::Arc::new(CharEstimator));
/// let mut conv = vec![Message::user("12345678")];
/// assert_eq!(counter.count(&conv), 2); // estimate only
/// conv.push(Message::assistant("ok").with_usage(Usage { input_tokens: 100, output_tokens: 1, ..Default::default() }));
/// conv.push(Message::user("abcd"));
/// assert_eq!(counter.count(&conv), 101 + 1); // usage + estimate after it
/// ```
pub struct ConversationTokens {
    counter: Arc<dyn TokenCounter>,
    /// Estimates by message id, kept across rewrites (compaction keeps messages verbatim).
    per_message: HashMap<MessageId, u64>,
    /// `prefix[i]` = sum of estimates of messages `[0, i)` of the last seen conversation.
    prefix: Vec<u64>,
    /// Ids of the last seen conversation, to detect rewrites cheaply.
    ids: Vec<MessageId>,
    /// Index and context size of every assistant message with usage among `ids`, in order (the
    /// last is the newest; a stack so [`invalidate_from`](Self::invalidate_from) can pop).
    usages: Vec<(usize, u64)>,
}

impl std::fmt::Debug for ConversationTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationTokens")
            .field("cached_messages", &self.ids.len())
            .finish()
    }
}

impl ConversationTokens {
    /// A counter using the given estimator.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        Self {
            counter,
            per_message: HashMap::new(),
            prefix: vec![0],
            ids: Vec::new(),
            usages: Vec::new(),
        }
    }

    /// The underlying estimator.
    pub fn estimator(&self) -> &Arc<dyn TokenCounter> {
        &self.counter
    }

    /// Forget everything (call after the history was rewritten if you want to free memory; a
    /// rewrite is also detected automatically).
    pub fn reset(&mut self) {
        self.per_message.clear();
        self.prefix = vec![0];
        self.ids.clear();
        self.usages.clear();
    }

    /// Forget what is cached from message `index` on (call when a message was changed in place,
    /// e.g. an attachment appended to it). Earlier messages stay cached.
    pub fn invalidate_from(&mut self, index: usize) {
        for id in self.ids.iter().skip(index) {
            self.per_message.remove(id);
        }
        self.ids.truncate(index);
        self.prefix.truncate(index + 1);
        while self.usages.last().is_some_and(|(i, _)| *i >= index) {
            self.usages.pop();
        }
    }

    /// Estimated tokens of one message, cached by id.
    pub fn message_tokens(&mut self, message: &Message) -> u64 {
        if let Some(t) = self.per_message.get(&message.id) {
            return *t;
        }
        let t = estimate_message(self.counter.as_ref(), message);
        self.per_message.insert(message.id.clone(), t);
        t
    }

    fn sync(&mut self, messages: &[Message]) {
        // Cheap rewrite detection: the conversation is append-only between compactions, so the
        // cached prefix is valid when its length fits and its first and last ids still match.
        let n = self.ids.len();
        let still_prefix = n <= messages.len()
            && (n == 0 || (messages[0].id == self.ids[0] && messages[n - 1].id == self.ids[n - 1]));
        if !still_prefix {
            self.prefix = vec![0];
            self.ids.clear();
            self.usages.clear();
        }
        for (i, m) in messages.iter().enumerate().skip(self.ids.len()) {
            if let (Role::Assistant, Some(u)) = (m.role, m.usage) {
                if u.context_tokens() > 0 {
                    self.usages.push((i, u.context_tokens()));
                }
            }
            let t = self.message_tokens(m);
            let last = self.prefix.last().copied().unwrap_or(0);
            self.prefix.push(last + t);
            self.ids.push(m.id.clone());
        }
    }

    /// Sum of estimates of `messages[from..]`, using the cache.
    pub fn estimate_from(&mut self, messages: &[Message], from: usize) -> u64 {
        self.sync(messages);
        let total = self.prefix.last().copied().unwrap_or(0);
        total - self.prefix.get(from).copied().unwrap_or(total)
    }

    /// The conversation's size: the newest assistant usage plus an estimate of every message
    /// after it (the estimate alone when no usage exists). O(new messages) while the conversation
    /// only grows.
    pub fn count(&mut self, messages: &[Message]) -> u64 {
        self.sync(messages);
        match self.usages.last().copied() {
            Some((idx, used)) => used + self.estimate_from(messages, idx + 1),
            None => self.estimate_from(messages, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{MediaSource, Usage};
    use serde_json::json;

    /// The cheap estimate never falls short of a real BPE count, in any language (a shortfall
    /// means compaction starts too late and the request overflows the window).
    #[test]
    fn the_estimate_covers_a_real_tokenizer_in_every_language() {
        let samples = [
            (
                "en",
                "Integration tests must hit a real database; never mock the db. Deploys run on Tuesdays after the staging check.",
            ),
            (
                "zh",
                "《战国无双3》是由光荣和ω-force开发的战国无双系列的正统第三续作。本作以三大故事为主轴，分别是以武田信玄等人为主的《关东三国志》。我们决定使用PostgreSQL作为主数据库，放弃MySQL。",
            ),
            (
                "ja",
                "デプロイは毎週金曜日にステージングで確認してから本番に出す。データベースのマイグレーションは必ずレビューを受けること。",
            ),
            (
                "ko",
                "캐시는 Redis로 바꾸기로 했다. 데이터베이스 마이그레이션은 반드시 리뷰를 받아야 하고 테스트는 실제 데이터베이스에 연결해서 실행한다.",
            ),
            (
                "ru",
                "Логи храним в ClickHouse, базы данных для логов не трогаем. Миграции базы данных всегда проходят ревью.",
            ),
            (
                "ar",
                "قررنا استخدام قاعدة بيانات PostgreSQL الرئيسية، ويجب أن تتصل الاختبارات بقاعدة بيانات حقيقية دائماً.",
            ),
            (
                "th",
                "เราตัดสินใจใช้ PostgreSQL เป็นฐานข้อมูลหลัก การทดสอบต้องเชื่อมต่อกับฐานข้อมูลจริงเสมอ ห้ามใช้ม็อก",
            ),
            (
                "vi",
                "Chúng tôi quyết định dùng PostgreSQL làm cơ sở dữ liệu chính; kiểm thử luôn kết nối cơ sở dữ liệu thật.",
            ),
            (
                "el",
                "Αποφασίσαμε να χρησιμοποιήσουμε την PostgreSQL ως κύρια βάση δεδομένων.",
            ),
            (
                "hi",
                "हमने PostgreSQL को मुख्य डेटाबेस के रूप में उपयोग करने का निर्णय लिया।",
            ),
            ("emoji", "Release party 🎉🚀🔥💯 went great 👍😀"),
        ];
        for encoding in [Encoding::Cl100kBase, Encoding::O200kBase] {
            let real = TiktokenCounter::new(encoding).unwrap();
            for (lang, text) in samples {
                let (estimate, bpe) = (CharEstimator.count(text), real.count(text));
                assert!(
                    estimate >= bpe,
                    "{lang} ({encoding:?}): estimate {estimate} < {bpe} tokens"
                );
            }
        }
    }

    #[test]
    fn estimates_every_block_kind() {
        let c = CharEstimator;
        let m = Message::new(
            Role::Assistant,
            vec![
                ContentBlock::text("abcd"),                              // 1
                ContentBlock::tool_use("t1", "read", json!({"p": "x"})), // 1 + 3
                ContentBlock::Thinking {
                    thinking: "12345678".into(),
                    signature: None,
                }, // 2
                ContentBlock::Image {
                    source: MediaSource::Url { url: "u".into() },
                }, // 2000
            ],
        );
        assert_eq!(estimate_message(&c, &m), 1 + 1 + 3 + 2 + 2000);
        let r = Message::new(
            Role::User,
            vec![ContentBlock::tool_result("t1", "abcdefgh", false)],
        );
        assert_eq!(estimate_message(&c, &r), 2);
    }

    #[test]
    fn usage_plus_estimate_after_newest_response() {
        let usage = |n| Usage {
            input_tokens: n,
            output_tokens: 10,
            cache_creation_input_tokens: 5,
            cache_read_input_tokens: 100,
        };
        let conv = vec![
            Message::user("a".repeat(40)),
            Message::assistant("x").with_usage(usage(1)),
            Message::user("b".repeat(40)),
            Message::assistant("y").with_usage(usage(1000)),
            Message::user("c".repeat(8)),
            Message::assistant("z".repeat(4)), // no usage (e.g. a scripted record)
        ];
        let mut cached = ConversationTokens::new(Arc::new(CharEstimator));
        let expected = 1000 + 10 + 5 + 100 + 2 + 1;
        assert_eq!(cached.count(&conv), expected);
        assert_eq!(count_conversation_uncached(&CharEstimator, &conv), expected);
    }

    #[test]
    fn all_zero_usage_counts_as_no_usage() {
        let conv = vec![
            Message::user("a".repeat(400)),
            Message::assistant("ok").with_usage(Usage::default()),
            Message::user("b".repeat(40)),
        ];
        let expected = 100 + 1 + 10;
        assert_eq!(count_conversation_uncached(&CharEstimator, &conv), expected);
        assert_eq!(
            ConversationTokens::new(Arc::new(CharEstimator)).count(&conv),
            expected
        );
        let m = crate::model::ModelResponse::text("x").into_message();
        assert_eq!(m.usage, None);
    }

    #[test]
    fn a_message_changed_in_place_is_recounted_after_invalidation() {
        let mut cached = ConversationTokens::new(Arc::new(CharEstimator));
        let mut conv = vec![
            Message::user("a".repeat(40)),
            Message::assistant("x").with_usage(Usage {
                input_tokens: 500,
                ..Default::default()
            }),
            Message::user("b".repeat(40)),
        ];
        assert_eq!(cached.count(&conv), 500 + 10);
        conv[2].content.push(ContentBlock::text("c".repeat(400)));
        cached.invalidate_from(2);
        assert_eq!(cached.count(&conv), 500 + 110);
        // Invalidating past a usage record falls back to the previous one (or none).
        conv[1].usage = None;
        cached.invalidate_from(1);
        assert_eq!(
            cached.count(&conv),
            count_conversation_uncached(&CharEstimator, &conv)
        );
    }

    #[test]
    fn incremental_matches_recount_and_detects_rewrites() {
        let mut cached = ConversationTokens::new(Arc::new(CharEstimator));
        let mut conv = Vec::new();
        for i in 0..50 {
            conv.push(Message::user(format!("question {i} {}", "q".repeat(i))));
            assert_eq!(
                cached.count(&conv),
                count_conversation_uncached(&CharEstimator, &conv)
            );
            let mut a = Message::assistant(format!("answer {i}"));
            if i % 5 == 0 {
                a = a.with_usage(Usage {
                    input_tokens: 1000 + i as u64,
                    ..Default::default()
                });
            }
            conv.push(a);
            assert_eq!(
                cached.count(&conv),
                count_conversation_uncached(&CharEstimator, &conv)
            );
        }
        // Rewrite (compaction): keep the tail only.
        let tail: Vec<Message> = conv[80..].to_vec();
        let mut rewritten = vec![Message::user("summary")];
        rewritten.extend(tail);
        assert_eq!(
            cached.count(&rewritten),
            count_conversation_uncached(&CharEstimator, &rewritten)
        );
    }

    #[test]
    fn tiktoken_counts_real_tokens() {
        let o = TiktokenCounter::new(Encoding::O200kBase).unwrap();
        let c = TiktokenCounter::new(Encoding::Cl100kBase).unwrap();
        assert_eq!(o.count("hello world"), 2);
        assert_eq!(c.count("hello world"), 2);
        assert!(o.count("The quick brown fox jumps over the lazy dog.") >= 9);
    }
}
