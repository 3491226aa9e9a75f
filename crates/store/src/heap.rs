//! What a cache holds on the heap, counted as the allocator holds it: for caches that report
//! their size ([`ScanCache::approx_bytes`](crate::ScanCache::approx_bytes), the selectors'
//! estimates, [`MemoryStore::approx_bytes`](crate::MemoryStore::approx_bytes)) so a memory
//! budget over them is the memory really used.
//!
//! Every allocation is counted as the block the allocator hands out for it ([`block`]): glibc's
//! malloc, the allocator of Rust programs on Linux, adds an 8-byte header to each request,
//! rounds up to 16 bytes and never hands out less than 32. A collection is counted by its
//! capacity, not its length, and a hash map by its buckets (a power of two, at most 7/8 full)
//! and their control bytes.

use std::collections::{HashMap, VecDeque};
use std::mem::size_of;

/// The bytes the allocator holds for one allocation of `size` bytes (0 for none).
///
/// ```
/// use memloop_store::heap::block;
/// assert_eq!(block(0), 0);
/// assert_eq!(block(1), 32);
/// assert_eq!(block(24), 32);
/// assert_eq!(block(25), 48);
/// ```
pub fn block(size: usize) -> usize {
    if size == 0 {
        0
    } else {
        (size.saturating_add(8 + 15) & !15).max(32)
    }
}

/// A string's buffer.
pub fn string(s: &String) -> usize {
    block(s.capacity())
}

/// A vector's buffer (not what its elements own).
pub fn vec<T>(v: &Vec<T>) -> usize {
    block(v.capacity().saturating_mul(size_of::<T>()))
}

/// A double-ended queue's buffer (not what its elements own).
pub fn deque<T>(v: &VecDeque<T>) -> usize {
    block(v.capacity().saturating_mul(size_of::<T>()))
}

/// A hash map's table: its buckets of `(K, V)` and their control bytes (not what its keys and
/// values own).
pub fn map<K, V, S>(m: &HashMap<K, V, S>) -> usize {
    table::<(K, V)>(m.capacity())
}

/// The table of a swiss-table hash map of `capacity` (what `capacity()` says) with entries of
/// `T`: `buckets` slots (a power of two; up to 7 entries in 8 slots from 8 on, one slot
/// spare below), then one control byte a slot plus a 16-byte group, aligned to 16.
fn table<T>(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity / 7).saturating_mul(8).next_power_of_two()
    };
    let slots = buckets.saturating_mul(size_of::<T>()).saturating_add(15) & !15;
    block(slots.saturating_add(buckets).saturating_add(16))
}

/// What a memory header's strings hold (path, name, description; not the header itself).
pub fn header(h: &crate::MemoryHeader) -> usize {
    string(&h.rel_path)
        + h.name.as_ref().map_or(0, string)
        + h.description.as_ref().map_or(0, string)
}

/// The block of an `Arc<T>` (its two counts and `T`).
pub fn arc<T>() -> usize {
    block(size_of::<T>() + 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_is_counted_by_its_buckets() {
        let mut m: HashMap<u64, u64> = HashMap::new();
        assert_eq!(map(&m), 0);
        m.insert(1, 1);
        // 4 buckets of 16 bytes, 4 control bytes and a group of 16.
        assert_eq!(map(&m), block(64 + 4 + 16));
        for i in 0..100 {
            m.insert(i, i);
        }
        // 100 entries need 128 buckets (at most 112 used).
        assert_eq!(map(&m), block(128 * 16 + 128 + 16));
    }
}
