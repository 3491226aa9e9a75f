//! A map of at most a fixed number of entries, the least recently inserted dropped first: for
//! what the server remembers per project it served (so that memory does not grow with the
//! number of distinct projects a long-running replica sees).

#[cfg(any(test, feature = "postgres"))]
use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// At most `cap` entries; inserting past it drops the entry inserted (or re-inserted) longest
/// ago.
#[derive(Debug)]
pub(crate) struct Bounded<K, V> {
    cap: usize,
    clock: u64,
    entries: HashMap<K, (u64, V)>,
    /// The keys by their last insert, oldest first.
    order: BTreeMap<u64, K>,
}

impl<K: Eq + Hash + Clone, V> Bounded<K, V> {
    /// An empty map of at most `cap` entries (at least one).
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            clock: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    /// The value at `key` (the team store's directory identities ask it).
    #[cfg(any(test, feature = "postgres"))]
    pub(crate) fn get<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.entries.get(key).map(|(_, v)| v)
    }

    /// Whether `key` is here (the team store's legacy claims ask it).
    #[cfg(any(test, feature = "postgres"))]
    pub(crate) fn contains<Q: Eq + Hash + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.entries.contains_key(key)
    }

    /// Keep `value` at `key`, newest; past the cap the oldest entry goes.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        self.clock += 1;
        if let Some((old, _)) = self.entries.insert(key.clone(), (self.clock, value)) {
            self.order.remove(&old);
        }
        self.order.insert(self.clock, key);
        while self.entries.len() > self.cap {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }

    /// The values, newest first.
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = &V> {
        self.order
            .values()
            .rev()
            .filter_map(|k| self.entries.get(k).map(|(_, v)| v))
    }

    /// How many entries it holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_the_oldest_insert_goes() {
        let mut m = Bounded::new(3);
        for i in 0..10 {
            m.insert(i, i * 10);
        }
        assert_eq!(m.len(), 3);
        assert_eq!(m.newest_first().copied().collect::<Vec<_>>(), [90, 80, 70]);
        // Re-inserting 7 makes it newest: 8 is the oldest now, and goes next.
        m.insert(7, 71);
        m.insert(10, 100);
        assert!(m.contains(&7) && !m.contains(&8));
        assert_eq!(m.get(&7), Some(&71));
        assert_eq!(m.newest_first().copied().collect::<Vec<_>>(), [100, 71, 90]);
    }
}
