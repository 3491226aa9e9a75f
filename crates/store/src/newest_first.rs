//! [`NewestFirst`]: the header list of a [`crate::ScanCache`], one contiguous slice in the scan
//! order (newest first, ties by path), as selectors take it, that takes a change at its front
//! without moving every header.
//!
//! A new memory is the newest, so it goes to the front of the list; a contiguous `Vec` would
//! move every header for it (about 1 MB at 10,000 memories). Here the buffer keeps free slots
//! before the list: an insert or a removal moves the headers on its shorter side only, the
//! front side into or out of the free slots, so a change near the front costs O(its position).
//! When the front has no free slot left, the list is copied once behind a gap of an eighth of
//! its length (amortised O(1) per insert at the front).

use crate::types::MemoryHeader;
use std::time::SystemTime;

/// A header list with free slots before it (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct NewestFirst {
    /// `start` free slots (placeholders owning no heap), then the list.
    slots: Vec<MemoryHeader>,
    start: usize,
}

/// What a free slot holds: a header that owns no heap.
fn free_slot() -> MemoryHeader {
    MemoryHeader {
        rel_path: String::new(),
        name: None,
        description: None,
        memory_type: None,
        mtime: SystemTime::UNIX_EPOCH,
    }
}

/// Fewest free slots made before the list when the front has none left.
const MIN_GAP: usize = 8;

impl NewestFirst {
    /// The list `list`, with no free slot yet.
    pub(crate) fn from_vec(list: Vec<MemoryHeader>) -> Self {
        Self {
            slots: list,
            start: 0,
        }
    }

    /// The list.
    pub(crate) fn as_slice(&self) -> &[MemoryHeader] {
        &self.slots[self.start..]
    }

    /// The buffer, free slots included (what the list costs in memory).
    pub(crate) fn buffer(&self) -> &Vec<MemoryHeader> {
        &self.slots
    }

    /// Put `h` at position `i` of the list (at most its length), moving the headers on the
    /// shorter side of `i`.
    pub(crate) fn insert(&mut self, i: usize, h: MemoryHeader) {
        let len = self.slots.len() - self.start;
        let i = i.min(len);
        if i >= len - i {
            self.slots.insert(self.start + i, h);
            return;
        }
        if self.start == 0 {
            self.make_gap();
        }
        // The free slot before the list takes the list's first `i` headers' place one by one,
        // ending at `i`, where `h` goes.
        self.start -= 1;
        let front = &mut self.slots[self.start..=self.start + i];
        front.rotate_left(1);
        front[i] = h;
    }

    /// Take the header at position `i` of the list, moving the headers on the shorter side of
    /// `i`; `None` past the end.
    pub(crate) fn remove(&mut self, i: usize) -> Option<MemoryHeader> {
        let len = self.slots.len() - self.start;
        if i >= len {
            return None;
        }
        if i >= len - 1 - i {
            return Some(self.slots.remove(self.start + i));
        }
        let front = &mut self.slots[self.start..=self.start + i];
        let taken = std::mem::replace(&mut front[i], free_slot());
        // The free slot moves to the front, and the list starts after it.
        front.rotate_right(1);
        self.start += 1;
        Some(taken)
    }

    /// Copy the list behind free slots (an eighth of its length, at least [`MIN_GAP`]).
    fn make_gap(&mut self) {
        let gap = (self.slots.len() / 8).max(MIN_GAP);
        let mut slots = Vec::with_capacity(gap + self.slots.len());
        slots.extend(std::iter::repeat_with(free_slot).take(gap));
        slots.append(&mut self.slots);
        self.slots = slots;
        self.start = gap;
    }
}

impl Clone for NewestFirst {
    /// The list alone, without its free slots.
    fn clone(&self) -> Self {
        Self::from_vec(self.as_slice().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn header(n: u16) -> MemoryHeader {
        MemoryHeader {
            rel_path: format!("n{n}.md"),
            mtime: SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(n) + 1),
            ..free_slot()
        }
    }

    proptest! {
        /// Every insert and removal, at any position, leaves the list a `Vec` would hold, and
        /// the free slots own nothing.
        #[test]
        fn the_list_is_the_one_a_vec_holds(
            ops in proptest::collection::vec((any::<bool>(), 0usize..64, 0u16..1000), 1..400),
        ) {
            let mut list = NewestFirst::default();
            let mut model: Vec<MemoryHeader> = Vec::new();
            for (insert, at, n) in ops {
                if insert || model.is_empty() {
                    // Mostly at the front, as new memories go.
                    let i = if at < 48 { at % 3 } else { at % (model.len() + 1) };
                    let i = i.min(model.len());
                    list.insert(i, header(n));
                    model.insert(i, header(n));
                } else {
                    let i = at % model.len();
                    prop_assert_eq!(list.remove(i), Some(model.remove(i)));
                }
                prop_assert_eq!(list.as_slice(), model.as_slice());
                prop_assert!(list.slots[..list.start].iter().all(|s| *s == free_slot()));
            }
            prop_assert_eq!(list.remove(model.len()), None);
            let copy = list.clone();
            prop_assert_eq!(copy.as_slice(), model.as_slice());
            prop_assert_eq!(copy.start, 0);
        }
    }

    #[test]
    fn inserts_at_the_front_move_no_header_until_the_gap_is_used_up() {
        let mut list = NewestFirst::from_vec((0..800).map(header).collect());
        list.insert(0, header(900));
        let (buffer, start) = (list.slots.as_ptr(), list.start);
        assert_eq!(start, 99, "a gap of an eighth of 800, one slot taken");
        for n in 0..99 {
            list.insert(0, header(1000 + n));
        }
        assert_eq!(list.start, 0);
        assert_eq!(list.slots.as_ptr(), buffer, "the buffer was not copied");
        assert_eq!(list.as_slice()[0], header(1098));
        assert_eq!(list.as_slice()[99], header(900));
        assert_eq!(list.as_slice()[100], header(0));
    }
}
