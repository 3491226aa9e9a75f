//! What every answer passes through before it leaves the process: control characters are
//! escaped in every string, every line of it ([`printable`]: a memory's body can hold a
//! terminal escape sequence), credential-shaped text is redacted (a hand-written memory file can
//! hold one) and the answer is cut to the size cap, with a note saying what was cut.

use memloop_secrets::redact_secrets;
use memloop_store::printable;
use serde_json::{Value, json};
use std::sync::Arc;

/// Most entries one `context_save` call accepts by default ([`McpLimits::max_batch_entries`]).
pub const MAX_BATCH: usize = 100;

/// Size caps of the server (bytes unless said otherwise). Configurable through
/// [`McpConfig::limits`](crate::McpConfig::limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpLimits {
    /// Largest memory one `context_save` entry or `context_manage update` may store (64 KiB),
    /// measured as every writer's is: the memory file's whole text, frontmatter and content.
    /// The server opens its stores with this limit ([`write_limits`](Self::write_limits)), so
    /// the stores' own write rules refuse a bigger one (`code: too_large`; in a batch, the
    /// whole batch is refused).
    pub max_entry_bytes: usize,
    /// Most entries in one `context_save` call (100).
    pub max_batch_entries: usize,
    /// Largest total `content` of one `context_save` call (1 MiB): a bigger batch is refused
    /// whole, as a tool error.
    pub max_batch_bytes: usize,
    /// Largest answer (serialized JSON, 256 KiB): the longest `content` fields are cut first,
    /// then trailing list items are dropped; the answer then carries `cut` with a note.
    pub max_answer_bytes: usize,
}

impl McpLimits {
    /// The write limits the server's stores are opened with.
    ///
    /// ```
    /// let limits = memloop_mcp::McpLimits::default();
    /// assert_eq!(limits.write_limits().max_text_bytes, 64 * 1024);
    /// ```
    pub fn write_limits(&self) -> memloop_store::WriteLimits {
        memloop_store::WriteLimits {
            max_text_bytes: self.max_entry_bytes,
        }
    }
}

impl Default for McpLimits {
    fn default() -> Self {
        Self {
            max_entry_bytes: 64 * 1024,
            max_batch_entries: MAX_BATCH,
            max_batch_bytes: 1024 * 1024,
            max_answer_bytes: 256 * 1024,
        }
    }
}

/// Strings of earlier answers found free of control characters and credential-shaped text.
/// Both are functions of the string alone, so a string seen clean is clean again: the same
/// memories, paths, titles and index go out in answer after answer, and each is scanned once
/// instead of every time (the secret patterns cost more than everything else an answer does).
///
/// Bounded in two generations of at most half of [`CLEAN_MAX_BYTES`] each: when the newer one
/// is full it becomes the older one and the older one is dropped; a string found in the older
/// one moves to the newer. So what answers keep using survives any number of turnovers, and a
/// stream of strings seen once (each new memory's, each big project's load warning, whose line
/// count changes with every save) pushes out only strings no answer used since the last
/// turnover, instead of emptying the whole set. Strings longer than [`CLEAN_MAX_STRING`] are
/// not kept.
#[derive(Default)]
struct CleanStrings {
    newer: Generation,
    older: Generation,
}

/// One generation of [`CleanStrings`].
#[derive(Default)]
struct Generation {
    /// A seeded hash (a client cannot choose strings that collide), faster than the
    /// standard one on the many strings each answer looks up.
    set: std::collections::HashSet<Box<str>, foldhash::fast::RandomState>,
    bytes: usize,
}

/// Most bytes of strings [`CleanStrings`] holds (both generations).
const CLEAN_MAX_BYTES: usize = 8 * 1024 * 1024;
/// Longest string [`CleanStrings`] keeps (a memory is at most 64 KiB by default).
const CLEAN_MAX_STRING: usize = 128 * 1024;

impl CleanStrings {
    /// Whether `s` is kept, moving it to the newer generation when it was in the older one.
    fn contains(&mut self, s: &str, max_bytes: usize) -> bool {
        if self.newer.set.contains(s) {
            return true;
        }
        match self.older.set.take(s) {
            Some(kept) => {
                self.older.bytes -= kept.len();
                self.insert(kept, max_bytes);
                true
            }
            None => false,
        }
    }

    /// Keep `s`, turning the generations over first when the newer one would pass half of
    /// `max_bytes`.
    fn insert(&mut self, s: Box<str>, max_bytes: usize) {
        if self.newer.bytes + s.len() > max_bytes / 2 {
            self.older = std::mem::take(&mut self.newer);
        }
        let len = s.len();
        if self.newer.set.insert(s) {
            self.newer.bytes += len;
        }
    }

    /// The bytes of strings kept (both generations).
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.newer.bytes + self.older.bytes
    }
}

static CLEAN: std::sync::LazyLock<std::sync::Mutex<CleanStrings>> =
    std::sync::LazyLock::new(Default::default);

fn clean_strings() -> std::sync::MutexGuard<'static, CleanStrings> {
    // A set of strings stays consistent whatever panicked while it was held.
    CLEAN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `s` was found clean before.
fn known_clean(s: &str) -> bool {
    s.len() <= CLEAN_MAX_STRING && clean_strings().contains(s, CLEAN_MAX_BYTES)
}

/// Remember that `s` holds no credential-shaped text.
fn remember_clean(s: &str) {
    if s.len() > CLEAN_MAX_STRING {
        return;
    }
    clean_strings().insert(s.into(), CLEAN_MAX_BYTES);
}

/// Escape control characters ([`printable`]) and replace credential-shaped text in every string
/// of `v`; returns how many credentials were replaced.
pub(crate) fn redact_value(v: &mut Value) -> usize {
    match v {
        Value::String(s) => {
            if known_clean(s) {
                return 0;
            }
            if let std::borrow::Cow::Owned(escaped) = printable(s) {
                *s = escaped;
            }
            let (out, n) = redact_secrets(s);
            if n > 0 {
                *s = out;
            } else {
                remember_clean(s);
            }
            n
        }
        Value::Array(items) => items.iter_mut().map(redact_value).sum(),
        Value::Object(map) => map.values_mut().map(redact_value).sum(),
        _ => 0,
    }
}

/// Top-level answer fields that echo what the client itself sent in the call (its idempotency
/// key), never stored memory text: they come back as sent, not redacted, so a key that happens
/// to look like a credential (`key-` and 32 hex digits is a Mailgun key's shape) is returned
/// intact. Echoing a client's own value to it leaks nothing.
const ECHOED: &[&str] = &["idempotency_key"];

/// A tool's answer as its body made it: the value, and at most one list of items the filter
/// has already passed (a `list` page's items, each escaped and redacted when it was made and
/// kept since: [`crate::pages::ListItems`]), which [`finish`] puts into the value under its key
/// after filtering the rest, instead of looking each of its strings up again, and whose kept
/// text it copies into the answer's text instead of serializing the items again.
pub(crate) struct Reply {
    value: Value,
    filtered: Option<(&'static str, Vec<Arc<FilteredItem>>)>,
}

/// An item the answer filter has passed: its value (control characters escaped, credentials
/// redacted), that value serialized (compact JSON, as `Value`'s `Display` writes it) and how
/// many credentials its redaction withheld (counted in the answer's `redacted` with the rest).
#[derive(Debug)]
pub(crate) struct FilteredItem {
    value: Value,
    text: String,
    redacted: usize,
}

impl FilteredItem {
    /// `value` passed through the filter.
    pub(crate) fn new(mut value: Value) -> Self {
        let redacted = redact_value(&mut value);
        let text = value.to_string();
        Self {
            value,
            text,
            redacted,
        }
    }

    /// The filtered value.
    #[cfg(test)]
    pub(crate) fn value(&self) -> &Value {
        &self.value
    }

    /// The item's size in an answer (its text's), in bytes.
    pub(crate) fn len(&self) -> usize {
        self.text.len()
    }

    /// The heap it takes, as [`memloop_store::heap`] counts (its value's maps counted at
    /// twice its text).
    pub(crate) fn heap_bytes(&self) -> usize {
        memloop_store::heap::string(&self.text) + 2 * self.text.len()
    }
}

impl Reply {
    /// `value`, with `items` (already filtered) to go under `key`.
    pub(crate) fn with_filtered(
        value: Value,
        key: &'static str,
        items: Vec<Arc<FilteredItem>>,
    ) -> Self {
        Self {
            value,
            filtered: Some((key, items)),
        }
    }

    /// The reply with its value made into another by `f` (the items stay apart).
    pub(crate) fn map(self, f: impl FnOnce(Value) -> Value) -> Self {
        Self {
            value: f(self.value),
            filtered: self.filtered,
        }
    }
}

impl From<Value> for Reply {
    fn from(value: Value) -> Self {
        Self {
            value,
            filtered: None,
        }
    }
}

/// Escape control characters in the reply's value, redact it, add the items it carries
/// already filtered, and fit it into `max_bytes`; adds `redacted` (how many credentials were
/// withheld) and `cut` (what was cut) when they apply. Also returns the answer serialized
/// (compact JSON, as `Value`'s `Display` writes it), which measuring its size produced anyway.
pub(crate) fn finish(reply: Reply, max_bytes: usize) -> (Value, String) {
    let Reply {
        value: mut v,
        filtered,
    } = reply;
    let echoed: Vec<(String, Value)> = match &mut v {
        Value::Object(map) => ECHOED
            .iter()
            .filter_map(|k| map.remove(*k).map(|e| ((*k).to_owned(), e)))
            .collect(),
        _ => Vec::new(),
    };
    let mut redacted = redact_value(&mut v);
    if let Value::Object(map) = &mut v {
        map.extend(echoed);
        if let Some((key, items)) = &filtered {
            // In its place now (an empty list), so the text below writes it where the value has it.
            map.insert((*key).into(), Value::Array(Vec::new()));
            redacted += items.iter().map(|i| i.redacted).sum::<usize>();
        }
    }
    if let (Value::Object(map), true) = (&mut v, redacted > 0) {
        map.insert(
            "redacted".into(),
            json!({
                "count": redacted,
                "note": "credential-shaped text in stored memories was withheld: \
                         [redacted: <kind>] marks each place",
            }),
        );
    }
    let Some((key, items)) = filtered else {
        return fit(v, max_bytes);
    };
    let text = spliced_text(&v, key, &items);
    if let Value::Object(map) = &mut v
        && let Some(slot) = map.get_mut(key)
    {
        *slot = Value::Array(items.iter().map(|i| i.value.clone()).collect());
    }
    match text {
        Some(text) if text.len() <= max_bytes => (v, text),
        // Over the cap (a page is made never to be) or not an object: measured and cut as any.
        _ => fit(v, max_bytes),
    }
}

/// The text of `v` (an object whose `key` holds an empty list) with `items`' kept texts as
/// that list: what `Value`'s `Display` writes once the items are in, without serializing them
/// again. `None` when `v` is not an object.
fn spliced_text(v: &Value, key: &str, items: &[Arc<FilteredItem>]) -> Option<String> {
    let Value::Object(map) = v else {
        return None;
    };
    let items_len: usize = items.iter().map(|i| i.text.len() + 1).sum();
    let mut out: Vec<u8> = Vec::with_capacity(size(v) + items_len);
    out.push(b'{');
    for (i, (k, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, k).ok()?;
        out.push(b':');
        if k == key {
            out.push(b'[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(item.text.as_bytes());
            }
            out.push(b']');
        } else {
            serde_json::to_writer(&mut out, value).ok()?;
        }
    }
    out.push(b'}');
    String::from_utf8(out).ok()
}

/// How many bytes `v` serializes to (compact JSON, as `Value`'s `Display` and
/// `serde_json::to_string` write it), counted without writing it.
pub(crate) fn size(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(b) => {
            if *b {
                4
            } else {
                5
            }
        }
        Value::Number(n) => number_len(n),
        Value::String(s) => string_len(s),
        Value::Array(items) => {
            2 + items.iter().map(size).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| string_len(k) + 1 + size(v))
                .sum::<usize>()
                + map.len().saturating_sub(1)
        }
    }
}

/// The serialized length of a JSON string: its quotes, and each byte as serde_json escapes it
/// (`"` and `\\` and the short control escapes take two bytes, other control characters six,
/// everything else, UTF-8 included, itself).
fn string_len(s: &str) -> usize {
    2 + s.len()
        + s.bytes()
            .map(|b| usize::from(ESCAPE_EXTRA[usize::from(b)]))
            .sum::<usize>()
}

/// The bytes serde_json's escape of each byte adds to it.
const ESCAPE_EXTRA: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        t[b] = 5;
        b += 1;
    }
    t[0x08] = 1;
    t[0x09] = 1;
    t[0x0a] = 1;
    t[0x0c] = 1;
    t[0x0d] = 1;
    t[b'"' as usize] = 1;
    t[b'\\' as usize] = 1;
    t
};

/// The serialized length of a number: integers counted by their digits, others written.
fn number_len(n: &serde_json::Number) -> usize {
    let digits = |mut u: u64| {
        let mut d = 1;
        while u >= 10 {
            u /= 10;
            d += 1;
        }
        d
    };
    if let Some(u) = n.as_u64() {
        digits(u)
    } else if let Some(i) = n.as_i64() {
        1 + digits(i.unsigned_abs())
    } else {
        n.to_string().len()
    }
}

/// The lengths of every `content` string of `v` (at any depth).
fn content_lens(v: &Value, out: &mut Vec<usize>) {
    match v {
        Value::Object(map) => {
            for (k, item) in map {
                match item {
                    Value::String(s) if k == "content" => out.push(s.len()),
                    other => content_lens(other, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| content_lens(i, out)),
        _ => {}
    }
}

/// Cut every `content` string of `v` longer than `share`; returns how many were cut.
fn cut_contents(v: &mut Value, share: usize) -> usize {
    match v {
        Value::Object(map) => map
            .iter_mut()
            .map(|(k, item)| match item {
                Value::String(s) if k == "content" => {
                    if s.len() > share {
                        cut_string(s, share.saturating_sub(200));
                        1
                    } else {
                        0
                    }
                }
                other => cut_contents(other, share),
            })
            .sum(),
        Value::Array(items) => items.iter_mut().map(|i| cut_contents(i, share)).sum(),
        _ => 0,
    }
}

/// `s` cut to at most `max` bytes (on a char boundary) with a note.
fn cut_string(s: &mut String, max: usize) {
    let total = s.len();
    let mut end = max.min(total);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str(&format!(
        "\n[cut: {end} of {total} bytes shown (answer size cap); read the entry alone with \
         context_search and a narrower query, or open the file]"
    ));
}

/// Room kept for the `cut` note itself.
const NOTE_ROOM: usize = 512;

/// `v` within `max_bytes`, and its serialization.
fn fit(mut v: Value, max_bytes: usize) -> (Value, String) {
    let text = v.to_string();
    let before = text.len();
    if before <= max_bytes {
        return (v, text);
    }
    let target = max_bytes.saturating_sub(NOTE_ROOM);
    // 1. Cut the longest contents to an equal share of what the rest leaves.
    let mut lens = Vec::new();
    content_lens(&v, &mut lens);
    let mut cut = 0usize;
    if !lens.is_empty() {
        let rest = before.saturating_sub(lens.iter().sum());
        let share = (target.saturating_sub(rest) / lens.len()).max(256);
        cut = cut_contents(&mut v, share);
    }
    // 2. Drop trailing items of the longest lists until it fits.
    let now = if cut == 0 { before } else { size(&v) };
    let dropped = drop_trailing(&mut v, now, target);
    if let Value::Object(map) = &mut v {
        map.insert(
            "cut".into(),
            json!({
                "note": format!(
                    "the answer was {before} bytes, over the {max_bytes}-byte cap: {cut} \
                     content field(s) were cut and {dropped} list item(s) left out; ask for fewer \
                     results or a narrower scope"
                ),
                "contents_cut": cut,
                "items_omitted": dropped,
            }),
        );
    }
    let text = v.to_string();
    (v, text)
}

/// Drop the last element of the longest non-empty list of `v` (by serialized size; the first
/// found on a tie), again and again, until `v` (serialized in `total` bytes now) serializes to
/// at most `target` bytes or no list
/// has an element left; returns how many were dropped. The lists are those reached through
/// objects alone (the root, an object's values, and so on: a list inside a list's element is
/// part of that element). Each element is measured once and the sizes are kept as elements go,
/// so the cost is linear in the answer, however many elements go.
fn drop_trailing(v: &mut Value, mut total: usize, target: usize) -> usize {
    fn lists<'a>(v: &'a mut Value, out: &mut Vec<&'a mut Vec<Value>>) {
        match v {
            Value::Array(items) => out.push(items),
            Value::Object(map) => map.values_mut().for_each(|i| lists(i, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    lists(v, &mut found);
    // Each list: its elements' sizes, how many are kept, and its size as serialized
    // (`[`, the kept elements, a comma between each two, `]`).
    let mut sizes: Vec<(Vec<usize>, usize, usize)> = found
        .iter()
        .map(|items| {
            let each: Vec<usize> = items.iter().map(size).collect();
            let size = 2 + each.iter().sum::<usize>() + each.len().saturating_sub(1);
            let kept = each.len();
            (each, kept, size)
        })
        .collect();
    let mut dropped = 0usize;
    while total > target {
        let mut longest: Option<usize> = None;
        for (i, (_, kept, size)) in sizes.iter().enumerate() {
            if *kept > 0 && longest.is_none_or(|l| *size > sizes[l].2) {
                longest = Some(i);
            }
        }
        let Some(l) = longest else { break };
        let (each, kept, size) = &mut sizes[l];
        *kept -= 1;
        let gone = each[*kept] + usize::from(*kept > 0);
        *size -= gone;
        total -= gone;
        dropped += 1;
    }
    for (items, (_, kept, _)) in found.into_iter().zip(&sizes) {
        items.truncate(*kept);
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings answers keep using stay known clean however many strings seen once pass
    /// through (each save brings new strings, each big project's load a new warning); one no answer
    /// used across two turnovers is dropped; the bytes kept never pass the bound.
    /// Items passed in filtered are in the answer as a value and as text, the text exactly
    /// what serializing the whole answer writes (keys before and after theirs, escapes,
    /// non-ASCII), their redactions counted; over the cap, the answer is cut as any other.
    #[test]
    fn filtered_items_are_spliced_into_the_text_as_serializing_writes_them() {
        let items: Vec<Arc<FilteredItem>> = [
            json!({"path": "知识/缓存.md", "title": "Кэш \"горячий\"", "description": "tab\there"}),
            json!({"path": "a.md", "title": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}),
            json!({"path": "b.md", "title": "line\u{1b}[31m"}),
        ]
        .into_iter()
        .map(|v| Arc::new(FilteredItem::new(v)))
        .collect();
        let value = json!({"action": "list", "total": 3, "zeta": "ω", "nextCursor": "ml1.x"});
        let (v, text) = finish(
            Reply::with_filtered(value.clone(), "memories", items.clone()),
            256 * 1024,
        );
        assert_eq!(text, v.to_string());
        assert_eq!(v["memories"].as_array().map(Vec::len), Some(3));
        assert_eq!(v["redacted"]["count"], 1, "{v}");
        assert!(!text.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"));
        assert!(!text.contains('\u{1b}'));
        assert_eq!(v["zeta"], "ω");
        // A cap the items do not fit in: the answer is cut, and its text is the cut value's.
        let (v, text) = finish(Reply::with_filtered(value, "memories", items), 120);
        assert_eq!(text, v.to_string());
        assert!(v.get("cut").is_some(), "{v}");
    }

    #[test]
    fn strings_in_use_survive_any_number_of_turnovers() {
        let max = 64 * 1024;
        let mut clean = CleanStrings::default();
        let used: Vec<String> = (0..20).map(|i| format!("заметка {i} 记录 {i}")).collect();
        for s in &used {
            clean.insert(s.as_str().into(), max);
        }
        for round in 0..400 {
            let once = format!("{}{round}", "索引".repeat(300));
            assert!(!clean.contains(&once, max));
            clean.insert(once.into(), max);
            if round % 10 == 0 {
                for s in &used {
                    assert!(clean.contains(s, max), "{s} lost at round {round}");
                }
            }
            assert!(clean.bytes() <= max, "round {round}");
        }
        clean.insert("一度だけ".into(), max);
        assert!(clean.contains("一度だけ", max));
        for round in 0..400 {
            clean.insert(format!("{}{round}", "y".repeat(900)).into(), max);
        }
        assert!(!clean.contains("一度だけ", max));
        assert!(clean.bytes() <= max);
    }

    proptest::proptest! {
        /// The size counted is the length serde_json writes, for any strings (control
        /// characters, quotes, backslashes, any script), numbers and nesting.
        #[test]
        fn the_size_counted_is_the_length_written(
            strings in proptest::collection::vec("(\\PC|[\\x00-\\x1f\"\\\\\u{7f}])*", 0..6),
            ints in proptest::collection::vec(proptest::num::i64::ANY, 0..4),
            uints in proptest::collection::vec(proptest::num::u64::ANY, 0..4),
            floats in proptest::collection::vec(proptest::num::f64::NORMAL, 0..4),
        ) {
            // Every ASCII character once, beside what was drawn.
            let mut strings = strings;
            strings.push((0u8..=0x7f).map(char::from).collect());
            let mut map = serde_json::Map::new();
            for (i, s) in strings.iter().enumerate() {
                map.insert(s.clone(), json!([s, i, null, true, false, {"k": s}]));
            }
            let v = json!({
                "strings": strings,
                "ints": ints,
                "uints": uints,
                "floats": floats,
                "nested": [map, [], {}],
            });
            proptest::prop_assert_eq!(size(&v), v.to_string().len());
            for s in &strings {
                let one = Value::String(s.clone());
                proptest::prop_assert_eq!(size(&one), one.to_string().len());
            }
        }
    }

    /// The rule as first written: measure everything again after every drop.
    fn drop_trailing_by_remeasuring(v: &mut Value, target: usize) -> usize {
        fn longest<'a>(v: &'a mut Value, best: &mut Option<(usize, &'a mut Vec<Value>)>) {
            match v {
                Value::Array(items) => {
                    let n = size(&Value::Array(items.clone()));
                    if !items.is_empty() && best.as_ref().is_none_or(|(b, _)| n > *b) {
                        *best = Some((n, items));
                    }
                }
                Value::Object(map) => map.values_mut().for_each(|i| longest(i, best)),
                _ => {}
            }
        }
        let mut dropped = 0;
        while size(v) > target {
            let mut best = None;
            longest(v, &mut best);
            match best.and_then(|(_, items)| items.pop()) {
                Some(_) => dropped += 1,
                None => break,
            }
        }
        dropped
    }

    /// A deterministic answer-shaped value: lists of several lengths beside and inside objects,
    /// lists inside list elements, empty lists, multi-byte text.
    fn answer(seed: u64) -> Value {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let item = |i: u64, next: &mut dyn FnMut(u64) -> u64| {
            let text = "ü部e".repeat(next(6) as usize);
            json!({"path": format!("knowledge/m{i}.md"), "content": text,
                   "tags": (0..next(4)).map(|t| t.to_string()).collect::<Vec<_>>()})
        };
        let list = |n: u64, next: &mut dyn FnMut(u64) -> u64| {
            Value::Array((0..n).map(|i| item(i, next)).collect())
        };
        let a = next(12);
        let b = next(12);
        let c = next(3);
        let results = list(a, &mut next);
        // Lists of equal size: the first found goes first.
        let entries = if seed.is_multiple_of(3) {
            results.clone()
        } else {
            list(b, &mut next)
        };
        json!({
            "project": "/work/p",
            "results": results,
            "nested": {"entries": entries, "empty": [], "n": 3},
            "few": list(c, &mut next),
        })
    }

    #[test]
    fn lists_drop_as_if_measured_again_after_every_drop() {
        for seed in 0..10u64 {
            let v = answer(seed);
            let full = size(&v);
            // Every target, so that each drop's exact size counts.
            for target in 0..=full + 1 {
                let (mut fast, mut slow) = (v.clone(), v.clone());
                let dropped = drop_trailing(&mut fast, full, target);
                assert_eq!(
                    dropped,
                    drop_trailing_by_remeasuring(&mut slow, target),
                    "seed {seed} target {target}"
                );
                assert_eq!(fast, slow, "seed {seed} target {target}");
            }
        }
        // A list at the root.
        let mut root = json!([1, "two", [3, 4], {"five": 5}]);
        let full = size(&root);
        assert_eq!(drop_trailing(&mut root, full, 10), 2);
        assert_eq!(root, json!([1, "two"]));
    }
}
