//! Ordered sets and maps kept as one sorted `Vec`.
//!
//! What the tools keep in a set or a map is a process tree's pids, their
//! (pid, start) pairs and a few marks: tens of entries, a few thousand at
//! most, built once per walk of `/proc` and then looked up. A binary search
//! over one allocation does that as well as a B-tree, and its code is a
//! fraction of the B-tree's: std's `BTreeMap` and `BTreeSet`, for each key
//! type, were 20 KB of graceful's static binary and 23 KB of reap's
//! (docs/benchmarks.md, issue 39). The types here keep the B-tree's order
//! and the methods the tools use, so iteration is in key order as before.
//! An insert in the middle moves the entries after it: O(n), which at these
//! sizes is a `memmove` of a few KiB at most.

/// A set in ascending order, without duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set<T>(Vec<T>);

impl<T: Ord> Set<T> {
    pub const fn new() -> Self {
        Set(Vec::new())
    }

    /// Adds `v`; false when it was there already.
    pub fn insert(&mut self, v: T) -> bool {
        let at = self.0.binary_search(&v);
        at.map_err(|at| self.0.insert(at, v)).is_err()
    }

    pub fn contains(&self, v: &T) -> bool {
        self.0.binary_search(v).is_ok()
    }

    /// The member equal to `v`.
    pub fn get(&self, v: &T) -> Option<&T> {
        self.0.binary_search(v).ok().map(|at| &self.0[at])
    }

    /// Takes `v` out; false when it was not there.
    pub fn remove(&mut self, v: &T) -> bool {
        self.0.binary_search(v).map(|at| self.0.remove(at)).is_ok()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }

    pub fn retain(&mut self, keep: impl FnMut(&T) -> bool) {
        self.0.retain(keep);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

impl<T: Ord> FromIterator<T> for Set<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut set = Set(Vec::new());
        set.extend(items);
        set
    }
}

impl<T: Ord> Extend<T> for Set<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        self.0.extend(items);
        self.0.sort_unstable();
        self.0.dedup();
    }
}

impl<'a, T> IntoIterator for &'a Set<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// A walk over a [`Map`]'s keys or values, in key order: a named type, so
/// that it holds no borrow past its use.
pub type Iter<'m, K, V, T> = std::iter::Map<std::slice::Iter<'m, (K, V)>, fn(&'m (K, V)) -> T>;

/// A map in ascending order of its keys, one value per key.
#[derive(Debug)]
pub struct Map<K, V>(Vec<(K, V)>);

impl<K: Ord, V> Map<K, V> {
    pub const fn new() -> Self {
        Map(Vec::new())
    }

    fn find(&self, k: &K) -> Result<usize, usize> {
        self.0.binary_search_by(|(key, _)| key.cmp(k))
    }

    /// Sets `k` to `v`, giving back the value it replaced.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(&k) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at].1, v)),
            Err(at) => {
                self.0.insert(at, (k, v));
                None
            }
        }
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.find(k).ok().map(|at| &self.0[at].1)
    }

    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.find(k).ok().map(|at| &mut self.0[at].1)
    }

    pub fn contains_key(&self, k: &K) -> bool {
        self.find(k).is_ok()
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        self.find(k).ok().map(|at| self.0.remove(at).1)
    }

    /// The value of `k`, made by `make` if there is none yet.
    pub fn get_or_insert_with(&mut self, k: K, make: impl FnOnce() -> V) -> &mut V {
        let at = self.find(&k).unwrap_or_else(|at| {
            self.0.insert(at, (k, make()));
            at
        });
        &mut self.0[at].1
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.0.retain_mut(|(k, v)| keep(k, v));
    }

    pub fn keys(&self) -> Iter<'_, K, V, &K> {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> Iter<'_, K, V, &V> {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

impl<K, V> Default for Map<K, V> {
    fn default() -> Self {
        Map(Vec::new())
    }
}

/// As `BTreeMap`'s: of two pairs with one key, the later one stays.
impl<K: Ord, V> FromIterator<(K, V)> for Map<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(items: I) -> Self {
        // By key, the later pair first, so that dedup (which keeps the
        // first of a run) keeps it. The unstable sort, not the stable one:
        // its 4 KiB scratch on the stack is touched (probed) wherever it is
        // inlined, a page more of every tool's stack.
        let mut v: Vec<(usize, (K, V))> = items.into_iter().enumerate().collect();
        v.sort_unstable_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.0.cmp(&a.0)));
        v.dedup_by(|later, kept| later.1 .0 == kept.1 .0);
        Map(v.into_iter().map(|(_, pair)| pair).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_sorted_and_unique_however_it_is_built() {
        let mut s: Set<i32> = [5, 1, 5, 3].into_iter().collect();
        assert_eq!(s.iter().copied().collect::<Vec<_>>(), [1, 3, 5]);
        assert!(s.insert(2) && !s.insert(3));
        s.extend([9, 0, 2]);
        assert_eq!(s.iter().copied().collect::<Vec<_>>(), [0, 1, 2, 3, 5, 9]);
        assert!(s.remove(&3) && !s.remove(&3) && !s.contains(&3) && s.contains(&9));
        s.retain(|&v| v % 2 == 1);
        assert_eq!([9, 5, 1].into_iter().collect::<Set<_>>(), s);
        assert_eq!((s.get(&5), s.get(&4), s.len()), (Some(&5), None, 3));
    }

    #[test]
    fn a_map_keeps_one_value_per_key_the_last_given() {
        let mut m: Map<i32, &str> = [(2, "a"), (1, "b"), (2, "c")].into_iter().collect();
        assert_eq!(m.values().copied().collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(m.insert(1, "d"), Some("b"));
        assert_eq!(m.insert(0, "e"), None);
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(*m.get_or_insert_with(5, || "f"), "f");
        assert_eq!(*m.get_or_insert_with(5, || "g"), "f");
        assert_eq!((m.get(&1), m.get(&7)), (Some(&"d"), None));
        assert_eq!(
            (m.remove(&0), m.remove(&0), m.contains_key(&5)),
            (Some("e"), None, true)
        );
        m.retain(|&k, _| k != 5);
        assert_eq!(m.keys().copied().collect::<Vec<_>>(), [1, 2]);
    }
}
