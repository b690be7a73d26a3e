//! A map, and a set, that is a list while it holds a few entries and a hash map once it holds
//! more. A collector keeps what it knows of its targets between runs in such maps: a hash map's
//! smallest table has room for three entries and its control bytes (224 bytes for one target, 320
//! with an instant beside it), which ten thousand tenants of one account each paid for twice;
//! a list of one holds that one. A scan of eight is as fast as a hash lookup.

use std::collections::HashMap;
use std::hash::Hash;

/// Entries up to which the map is a list.
const FEW: usize = 8;

/// A map from `K` to `V`: a list of at most [`FEW`] entries, else a hash map.
#[derive(Debug, Clone)]
pub enum FewMap<K, V> {
    Few(Vec<(K, V)>),
    Many(HashMap<K, V>),
}

impl<K, V> Default for FewMap<K, V> {
    fn default() -> Self {
        FewMap::Few(Vec::new())
    }
}

impl<K: Hash + Eq, V> FewMap<K, V> {
    pub fn get(&self, key: &K) -> Option<&V> {
        match self {
            FewMap::Few(list) => list.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            FewMap::Many(map) => map.get(key),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        match self {
            FewMap::Few(list) => list.len(),
            FewMap::Many(map) => map.len(),
        }
    }

    /// Sets `key` to `value`; returns the value it had.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self {
            FewMap::Few(list) => {
                if let Some((_, v)) = list.iter_mut().find(|(k, _)| *k == key) {
                    return Some(std::mem::replace(v, value));
                }
                if list.len() < FEW {
                    // One more place, not the four a vector takes when it grows from nothing.
                    list.reserve_exact(1);
                    list.push((key, value));
                } else {
                    let mut map: HashMap<K, V> = std::mem::take(list).into_iter().collect();
                    map.insert(key, value);
                    *self = FewMap::Many(map);
                }
                None
            }
            FewMap::Many(map) => map.insert(key, value),
        }
    }

    /// Keeps the entries for which `keep` says so.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        match self {
            FewMap::Few(list) => list.retain_mut(|(k, v)| keep(k, v)),
            FewMap::Many(map) => map.retain(|k, v| keep(k, v)),
        }
    }
}

impl<K: Hash + Eq, V> FromIterator<(K, V)> for FewMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut map = if iter.size_hint().0 > FEW {
            FewMap::Many(HashMap::with_capacity(iter.size_hint().0))
        } else {
            FewMap::default()
        };
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

/// A set of `K`: a list of at most [`FEW`], else a hash set (of a map to nothing).
#[derive(Debug, Clone)]
pub struct FewSet<K>(FewMap<K, ()>);

impl<K> Default for FewSet<K> {
    fn default() -> Self {
        FewSet(FewMap::default())
    }
}

impl<K: Hash + Eq> FewSet<K> {
    pub fn contains(&self, key: &K) -> bool {
        self.0.get(key).is_some()
    }
}

impl<K: Hash + Eq> FromIterator<K> for FewSet<K> {
    fn from_iter<I: IntoIterator<Item = K>>(iter: I) -> Self {
        FewSet(iter.into_iter().map(|k| (k, ())).collect())
    }
}

impl<K: Hash + Eq> Extend<K> for FewSet<K> {
    fn extend<I: IntoIterator<Item = K>>(&mut self, iter: I) {
        for k in iter {
            self.0.insert(k, ());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_map_answers_as_a_hash_map_before_and_after_it_grows_into_one() {
        let mut few: FewMap<u32, u32> = FewMap::default();
        let mut map: HashMap<u32, u32> = HashMap::new();
        for i in 0..40 {
            let k = i * 7 % 23;
            assert_eq!(few.insert(k, i), map.insert(k, i));
            if i % 5 == 0 {
                few.retain(|k, _| k % 3 != 0);
                map.retain(|k, _| k % 3 != 0);
            }
            assert_eq!(few.len(), map.len());
            for k in 0..25 {
                assert_eq!(few.get(&k), map.get(&k), "{k} after {i}");
            }
        }
        assert!(matches!(few, FewMap::Many(_)));
    }

    #[test]
    fn one_entry_takes_one_place_and_a_set_keeps_each_key_once() {
        let mut few: FewMap<u64, u64> = FewMap::default();
        few.insert(1, 1);
        let FewMap::Few(list) = &few else {
            panic!("one entry is a list")
        };
        assert_eq!(list.capacity(), 1);
        let set: FewSet<u8> = [1, 2, 1, 3, 2].into_iter().collect();
        assert_eq!(set.0.len(), 3);
        assert!(set.contains(&3) && !set.contains(&4));
        let many: FewSet<u32> = (0..100).chain(0..100).collect();
        assert_eq!(many.0.len(), 100);
        assert!(many.contains(&99));
    }
}
