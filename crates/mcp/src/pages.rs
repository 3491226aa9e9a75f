//! `context_manage list` in pages, as MCP lists page (`nextCursor`): the memories whose path
//! starts with the list's prefix, by path, at most [`PAGE_ITEMS`] of them and at most a byte
//! budget per page, each item's strings bounded. A page's cursor is the last path it listed,
//! so the next page starts strictly after it: a memory written or deleted between two pages
//! neither repeats nor hides the others.
//!
//! The cursor is opaque to the client: a version tag, the last path (hex) and a checksum that
//! binds it to the store it lists (the project, or the global memory) and the prefix. A cursor
//! that does not decode, whose checksum does not match, or that names a path outside the prefix
//! is refused; it never starts a page anywhere else.

use crate::answer::FilteredItem;
use memloop_store::{Headers, MemoryHeader};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

/// Most memories one `list` page holds.
pub const PAGE_ITEMS: usize = 100;
/// Most bytes the items of one page take (their JSON, as it leaves the server), at most half
/// the answer cap: the rest of the answer is a few hundred bytes.
pub const PAGE_BYTES: usize = 96 * 1024;
/// Most characters of a title a list item shows (a longer one is cut, with `…`).
pub const ITEM_TITLE_CHARS: usize = 120;
/// Most characters of a description a list item shows (a longer one is cut, with `…`).
pub const ITEM_DESCRIPTION_CHARS: usize = 240;

/// The tag that starts every cursor of this format.
const CURSOR_TAG: &str = "ml1";
/// Hex digits of a cursor's checksum.
const CHECK_DIGITS: usize = 32;

/// The checksum binding a cursor to the store it lists (`scope`), the prefix and its path.
fn checksum(scope: &str, prefix: &str, after: &str) -> String {
    let mut h = Sha256::new();
    for part in [CURSOR_TAG, scope, prefix, after] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let digest = h.finalize();
    digest
        .iter()
        .take(CHECK_DIGITS / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The cursor of the page after the one that ended with `after` (a listing of `scope` by
/// `prefix`).
pub(crate) fn encode_cursor(scope: &str, prefix: &str, after: &str) -> String {
    let path: String = after.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{CURSOR_TAG}.{path}.{}", checksum(scope, prefix, after))
}

/// Why a cursor was refused (shown to the client with `code: invalid_cursor`).
pub(crate) const INVALID_CURSOR: &str = "cursor is not one this server gave for this list: pass \
    the nextCursor of the previous page as it was, with the same project and target, or list \
    again without a cursor to start from the first page";

/// The path a `cursor` says the previous page ended with, if it is one [`encode_cursor`] wrote
/// for `scope` and `prefix`.
pub(crate) fn decode_cursor(cursor: &str, scope: &str, prefix: &str) -> Option<String> {
    let mut parts = cursor.trim().split('.');
    let (Some(CURSOR_TAG), Some(path), Some(check), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if path.is_empty() || path.len() % 2 != 0 || !path.is_ascii() {
        return None;
    }
    let bytes = (0..path.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&path[i..i + 2], 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let after = String::from_utf8(bytes).ok()?;
    let expected = checksum(scope, prefix, &after);
    // The checksum in constant time, though it guards no secret: a cursor is only a position.
    let same = check.len() == expected.len()
        && subtle::ConstantTimeEq::ct_eq(check.as_bytes(), expected.as_bytes()).into();
    (same && after.starts_with(prefix)).then_some(after)
}

/// One memory as a list page shows it: its item (JSON) as the answer filter passed it, with
/// its text. A pure function of the memory's header, so it is kept per header
/// ([`ListItems`]).
#[derive(Debug)]
pub(crate) struct ListItem {
    /// The header it was made from: a kept item serves only a header equal to it.
    pub(crate) header: MemoryHeader,
    /// The item, filtered.
    pub(crate) item: Arc<FilteredItem>,
}

impl ListItem {
    /// The item's size in the answer, with its separator.
    pub(crate) fn size(&self) -> usize {
        self.item.len() + 1
    }
}

/// Most list items a project keeps made ([`ListItems`]): a few pages.
const KEPT_ITEMS: usize = 4 * PAGE_ITEMS;

/// A project's list items as made for the last pages listed, so a page whose memories did not
/// change since (a growing project's first page, mostly) is made of them instead of rendering,
/// redacting and measuring each memory again. At most [`KEPT_ITEMS`]; when full, it starts
/// over.
#[derive(Debug, Default)]
pub(crate) struct ListItems {
    kept: std::sync::Mutex<KeptItems>,
}

#[derive(Debug, Default)]
struct KeptItems {
    items: HashMap<String, Arc<ListItem>, foldhash::fast::RandomState>,
    /// Their estimated heap size.
    bytes: usize,
}

impl ListItems {
    /// The item of each of `headers`, in order: the kept one when it was made from an equal
    /// header, else made by `make` (and kept). The lock is not held while items are made.
    pub(crate) fn items<'a>(
        &self,
        headers: impl IntoIterator<Item = &'a MemoryHeader>,
        make: impl Fn(&MemoryHeader) -> ListItem,
    ) -> Vec<Arc<ListItem>> {
        let headers: Vec<&MemoryHeader> = headers.into_iter().collect();
        let found: Vec<Option<Arc<ListItem>>> = match self.kept.lock() {
            Ok(kept) => headers
                .iter()
                .map(|h| {
                    kept.items
                        .get(&h.rel_path)
                        .filter(|i| i.header == **h)
                        .cloned()
                })
                .collect(),
            Err(_) => headers.iter().map(|_| None).collect(),
        };
        let out: Vec<(Arc<ListItem>, bool)> = headers
            .iter()
            .zip(found)
            .map(|(h, found)| match found {
                Some(item) => (item, false),
                None => (Arc::new(make(h)), true),
            })
            .collect();
        if let Ok(mut kept) = self.kept.lock() {
            for (item, _) in out.iter().filter(|(_, made)| *made) {
                kept.keep(item.clone());
            }
        }
        out.into_iter().map(|(item, _)| item).collect()
    }

    /// An estimate of the memory the kept items hold, in bytes (`None` while a request
    /// holds them).
    pub(crate) fn approx_bytes(&self) -> Option<usize> {
        let kept = self.kept.try_lock().ok()?;
        Some(kept.bytes + kept.items.capacity() * std::mem::size_of::<(String, Arc<ListItem>)>())
    }
}

impl KeptItems {
    /// Keep `item` under its path (replacing what was kept there); when [`KEPT_ITEMS`] are
    /// kept already, start over.
    fn keep(&mut self, item: Arc<ListItem>) {
        if self.items.len() >= KEPT_ITEMS {
            self.items.clear();
            self.bytes = 0;
        }
        self.bytes += item_bytes(&item);
        if let Some(old) = self.items.insert(item.header.rel_path.clone(), item) {
            self.bytes = self.bytes.saturating_sub(item_bytes(&old));
        }
    }
}

/// The heap an item takes: its path's key, its header, and its filtered item.
fn item_bytes(item: &ListItem) -> usize {
    use memloop_store::heap::{arc, block, header};
    block(std::mem::size_of::<ListItem>() + 16)
        + 2 * item.header.rel_path.len()
        + header(&item.header)
        + arc::<FilteredItem>()
        + item.item.heap_bytes()
}

/// The first `n` of `headers` by path among those whose path starts with `prefix` and comes
/// strictly after `after`, in path order, and how many headers start with `prefix` in all: a
/// range of the cache's by-path view ([`Headers::by_path`], [`Headers::count`]), O(n log m)
/// for a project of `m` memories.
pub(crate) fn first_by_path<'a>(
    headers: &'a Headers,
    prefix: &str,
    after: Option<&str>,
    n: usize,
) -> (Vec<&'a MemoryHeader>, usize) {
    let page = headers.by_path(prefix, after).take(n).collect();
    (page, headers.count(prefix))
}

/// `text` cut to at most `max` characters, with `…` when it was longer.
pub(crate) fn bounded_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => {
            let mut out = text[..end].to_owned();
            out.push('…');
            out
        }
        None => text.to_owned(),
    }
}

/// `h` with its title and description cut to what a list item shows.
pub(crate) fn bounded_header(h: &MemoryHeader) -> MemoryHeader {
    MemoryHeader {
        rel_path: h.rel_path.clone(),
        name: h
            .name
            .as_deref()
            .map(|n| bounded_chars(n, ITEM_TITLE_CHARS)),
        description: h
            .description
            .as_deref()
            .map(|d| bounded_chars(d, ITEM_DESCRIPTION_CHARS)),
        memory_type: h.memory_type,
        mtime: h.mtime,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::Value;
    use std::time::UNIX_EPOCH;

    fn header(path: &str) -> MemoryHeader {
        MemoryHeader {
            rel_path: path.into(),
            name: None,
            description: None,
            memory_type: None,
            mtime: UNIX_EPOCH,
        }
    }

    /// A kept item serves only a header equal to the one it was made from: the same path with
    /// another title, description, type or time is made again; past the bound the kept items
    /// start over, and their estimate follows.
    #[test]
    fn a_kept_list_item_serves_only_an_equal_header() {
        let kept = ListItems::default();
        let made = std::cell::Cell::new(0);
        let make = |h: &MemoryHeader| {
            made.set(made.get() + 1);
            ListItem {
                header: h.clone(),
                item: Arc::new(FilteredItem::new(Value::String(
                    h.name.clone().unwrap_or_default(),
                ))),
            }
        };
        let mut a = header("knowledge/база-данных.md");
        a.name = Some("База данных".into());
        let b = header("knowledge/缓存.md");
        let first = kept.items([&a, &b], make);
        assert_eq!(made.get(), 2);
        let again = kept.items([&a, &b], make);
        assert_eq!(made.get(), 2);
        assert!(Arc::ptr_eq(&first[0], &again[0]) && Arc::ptr_eq(&first[1], &again[1]));
        let before = kept.approx_bytes().unwrap();
        for change in [
            |h: &mut MemoryHeader| h.name = Some("База данных 16".into()),
            |h: &mut MemoryHeader| h.description = Some("где она".into()),
            |h: &mut MemoryHeader| h.memory_type = Some(memloop_store::MemoryType::Project),
            |h: &mut MemoryHeader| h.mtime += std::time::Duration::from_secs(1),
        ] {
            let n = made.get();
            change(&mut a);
            let item = kept.items([&a], make);
            assert_eq!(made.get(), n + 1);
            assert_eq!(item[0].header, a);
            assert_eq!(
                item[0].item.value(),
                &Value::String(a.name.clone().unwrap())
            );
        }
        assert!(kept.approx_bytes().unwrap() >= before);
        let many: Vec<MemoryHeader> = (0..KEPT_ITEMS + 10)
            .map(|i| header(&format!("todos/{i}.md")))
            .collect();
        kept.items(&many, make);
        let held = kept.kept.lock().unwrap().items.len();
        assert!(held <= KEPT_ITEMS, "{held}");
    }

    #[test]
    fn a_cursor_decodes_only_for_its_own_store_and_prefix() {
        let c = encode_cursor("proj-1", "decisions/", "decisions/выбор-базы.md");
        assert_eq!(
            decode_cursor(&c, "proj-1", "decisions/").as_deref(),
            Some("decisions/выбор-базы.md")
        );
        assert_eq!(decode_cursor(&c, "proj-2", "decisions/"), None);
        assert_eq!(decode_cursor(&c, "proj-1", "todos/"), None);
        assert_eq!(decode_cursor(&c, "proj-1", ""), None);
        // A cursor whose path was changed by hand, or that is not one at all.
        let forged =
            encode_cursor("proj-1", "decisions/", "decisions/a.md").replacen("61", "62", 1);
        assert_eq!(decode_cursor(&forged, "proj-1", "decisions/"), None);
        for junk in [
            "",
            "ml1",
            "ml1..",
            "ml1.zz.00",
            "ml1.ff.00",
            "数据库",
            "ml1.6.x.y",
        ] {
            assert_eq!(decode_cursor(junk, "proj-1", ""), None, "{junk}");
        }
    }

    #[test]
    fn the_first_by_path_after_a_path_within_the_prefix() {
        let hs: Headers = ["todos/b.md", "decisions/c.md", "todos/a.md", "todos/я.md"]
            .into_iter()
            .map(header)
            .collect();
        let paths = |(v, total): (Vec<&MemoryHeader>, usize)| {
            (
                v.iter().map(|h| h.rel_path.clone()).collect::<Vec<_>>(),
                total,
            )
        };
        assert_eq!(
            paths(first_by_path(&hs, "todos/", None, 2)),
            (vec!["todos/a.md".to_owned(), "todos/b.md".to_owned()], 3)
        );
        assert_eq!(
            paths(first_by_path(&hs, "todos/", Some("todos/b.md"), 2)),
            (vec!["todos/я.md".to_owned()], 3)
        );
        assert_eq!(bounded_chars("Принятое решение", 7), "Принято…");
        assert_eq!(bounded_chars("决定", 7), "决定");
    }
}
