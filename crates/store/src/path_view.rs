//! [`PathView`]: every listed path with its mtime, in path order, kept in blocks so a new path
//! moves one block's entries, not half the project's.

use std::ops::Range;
use std::time::SystemTime;

/// Most entries a block holds; a fuller one is split in two.
const BLOCK: usize = 512;

/// A path with the mtime it is listed with, and a hint of where its header is in the list the
/// view is kept with: its place counted from the list's end when the view took it (the
/// list's owner checks it before trusting it: see `Headers::listed`).
pub(crate) type Entry = (String, SystemTime, u32);

/// Paths in order, in consecutive blocks (each non-empty, at most [`BLOCK`] entries, every
/// entry of a block before every entry of the next). Finding a path is two binary searches;
/// an insert or a remove moves at most one block's entries (and, when a block splits or
/// empties, the block list, one pointer a block); counting the paths under a prefix adds the
/// sizes of the blocks it covers.
#[derive(Debug, Clone, Default)]
pub(crate) struct PathView {
    blocks: Vec<Vec<Entry>>,
}

/// Where a path sits (or would): its block and its place in the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    block: usize,
    at: usize,
}

impl PathView {
    /// The view of `sorted` (in path order, each path once).
    pub(crate) fn from_sorted(sorted: Vec<Entry>) -> Self {
        let mut blocks = Vec::with_capacity(sorted.len().div_ceil(BLOCK / 2));
        let mut rest = sorted.into_iter().peekable();
        while rest.peek().is_some() {
            blocks.push(rest.by_ref().take(BLOCK / 2).collect());
        }
        Self { blocks }
    }

    /// Every entry, in path order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.blocks.iter().flatten()
    }

    /// The block `path` belongs in: the first whose last path is not before it (the last
    /// block when every path is before it).
    fn block_for(&self, path: &str) -> usize {
        let b = self
            .blocks
            .partition_point(|b| b.last().is_some_and(|(p, ..)| p.as_str() < path));
        b.min(self.blocks.len().saturating_sub(1))
    }

    /// Where `path` is (`Ok`) or would be inserted (`Err`).
    pub(crate) fn find(&self, path: &str) -> Result<Place, Place> {
        let block = self.block_for(path);
        let Some(entries) = self.blocks.get(block) else {
            return Err(Place { block: 0, at: 0 });
        };
        entries
            .binary_search_by(|(p, ..)| p.as_str().cmp(path))
            .map(|at| Place { block, at })
            .map_err(|at| Place { block, at })
    }

    /// The entry of `path`.
    pub(crate) fn get(&self, path: &str) -> Option<&Entry> {
        let place = self.find(path).ok()?;
        self.blocks.get(place.block)?.get(place.at)
    }

    /// Add `path` (not listed) where [`Self::find`] said it would go.
    pub(crate) fn insert(&mut self, place: Place, entry: Entry) {
        if self.blocks.is_empty() {
            self.blocks.push(Vec::with_capacity(BLOCK / 2));
        }
        let block = &mut self.blocks[place.block];
        block.insert(place.at, entry);
        if block.len() > BLOCK {
            let upper = block.split_off(block.len() / 2);
            self.blocks.insert(place.block + 1, upper);
        }
    }

    /// Remove the entry at `place` (found by [`Self::find`]).
    pub(crate) fn remove(&mut self, place: Place) -> Entry {
        let block = &mut self.blocks[place.block];
        let entry = block.remove(place.at);
        if block.is_empty() {
            self.blocks.remove(place.block);
        }
        entry
    }

    /// The entries (as a global index range) whose path starts with `prefix`.
    fn prefixed(&self, prefix: &str) -> (Place, Range<usize>) {
        let start = self.find(prefix).unwrap_or_else(|p| p);
        let before: usize = self.blocks[..start.block].iter().map(Vec::len).sum();
        let mut len = 0;
        for (b, entries) in self.blocks.iter().enumerate().skip(start.block) {
            let from = if b == start.block { start.at } else { 0 };
            let rest = &entries[from..];
            let n = rest.partition_point(|(p, ..)| p.starts_with(prefix));
            len += n;
            if n < rest.len() {
                break;
            }
        }
        let first = before + start.at;
        (start, first..first + len)
    }

    /// How many paths start with `prefix`.
    pub(crate) fn count(&self, prefix: &str) -> usize {
        self.prefixed(prefix).1.len()
    }

    /// The entries whose path starts with `prefix`, in order, from the first path strictly
    /// after `after` (from the first of the prefix without it).
    pub(crate) fn starting_with(
        &self,
        prefix: &str,
        after: Option<&str>,
    ) -> impl Iterator<Item = &Entry> + '_ {
        let (start, range) = self.prefixed(prefix);
        let from = match after {
            // The first path after `after`: still under the prefix, or past it.
            Some(a) if a >= prefix => match self.find(a) {
                Ok(p) => Place {
                    block: p.block,
                    at: p.at + 1,
                },
                Err(p) => p,
            },
            _ => start,
        };
        let first = self.blocks[..from.block.min(self.blocks.len())]
            .iter()
            .map(Vec::len)
            .sum::<usize>()
            + from.at;
        let len = range.end.saturating_sub(first);
        self.blocks
            .iter()
            .enumerate()
            .skip(from.block)
            .flat_map(move |(b, entries)| {
                let skip = if b == from.block { from.at } else { 0 };
                entries.get(skip..).unwrap_or(&[]).iter()
            })
            .take(len)
    }

    /// The heap the view's buffers take (block list and blocks, by capacity), as
    /// [`crate::heap`] counts; the paths' own strings are not included.
    pub(crate) fn buffers(&self) -> usize {
        crate::heap::vec(&self.blocks) + self.blocks.iter().map(crate::heap::vec).sum::<usize>()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// The view agrees with a sorted map after every insert and remove, across splits and
    /// emptied blocks, for lookups, counts and listings from any cursor under any prefix.
    #[test]
    fn the_view_is_what_a_sorted_map_says() {
        let mut view = PathView::from_sorted(Vec::new());
        let mut model: BTreeMap<String, SystemTime> = BTreeMap::new();
        let folders = ["", "todos/", "todos/sub/", "знания/", "知识/", "a"];
        let mut x: u64 = 7;
        for step in 0..6000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let folder = folders[(x >> 33) as usize % folders.len()];
            let path = format!("{folder}{}.md", (x >> 40) % 2500);
            let remove = step % 3 == 2 || (step > 4000 && step % 2 == 0);
            match (view.find(&path), remove) {
                (Ok(place), true) => {
                    assert_eq!(view.remove(place).0, path);
                    model.remove(&path);
                }
                (Err(place), false) => {
                    view.insert(place, (path.clone(), at(step), 0));
                    model.insert(path, at(step));
                }
                (Ok(_), false) => assert!(model.contains_key(&path)),
                (Err(_), true) => assert!(!model.contains_key(&path)),
            }
            assert!(
                view.blocks
                    .iter()
                    .all(|b| !b.is_empty() && b.len() <= BLOCK)
            );
            if step % 500 == 0 || step == 5999 {
                let listed: Vec<&Entry> = view.iter().collect();
                let expected: Vec<(&String, &SystemTime)> = model.iter().collect();
                assert_eq!(listed.len(), expected.len());
                assert!(
                    listed
                        .iter()
                        .zip(&expected)
                        .all(|(a, b)| &a.0 == b.0 && &a.1 == b.1)
                );
                for prefix in folders.iter().chain(&["todos/1", "none/", "知识/2"]) {
                    let under: Vec<&String> =
                        model.keys().filter(|p| p.starts_with(prefix)).collect();
                    assert_eq!(view.count(prefix), under.len(), "count of {prefix}");
                    let all: Vec<&String> =
                        view.starting_with(prefix, None).map(|(p, ..)| p).collect();
                    assert_eq!(all, under, "listing {prefix}");
                    for cursor in under.iter().step_by(97).chain(&[&"todos/".to_owned()]) {
                        let after: Vec<&String> = view
                            .starting_with(prefix, Some(cursor))
                            .map(|(p, ..)| p)
                            .collect();
                        let want: Vec<&String> =
                            under.iter().copied().filter(|p| *p > *cursor).collect();
                        assert_eq!(after, want, "after {cursor} in {prefix}");
                    }
                }
                for (p, t) in model.iter().step_by(50) {
                    assert_eq!(view.get(p).map(|e| e.1), Some(*t));
                }
            }
        }
        assert!(view.blocks.len() > 2, "the run split blocks");
    }
}
