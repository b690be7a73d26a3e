//! `--shard=i/n`: this process polls only its share of a static fleet, so replicas split the
//! fleet without a coordinator.
//!
//! A target belongs to shard `hash(tenant;key) mod n`, where the hash is Prometheus' `hashmod`
//! relabel action (the last 8 bytes of the MD5 sum, big-endian) and the key is the account id for
//! every account target, else the target's label value. So a Prometheus set-up sharded with
//! `hashmod` over the labels `[tenant, account_id]` (default separator `;`; no tenant label
//! reads as empty) agrees with the exporter replicas on who owns an account.

use std::fmt;
use std::str::FromStr;

use md5::{Digest, Md5};

/// Shards at most; far beyond any fleet one process cannot poll.
pub const MAX_SHARDS: u32 = 10_000;

/// This process's shard: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Default for Shard {
    /// The whole fleet.
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let usage = "write it as i/n: this process's number i (from 0) of n replicas, e.g. 0/3";
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a shard; {usage}"))?;
        let number = |v: &str| -> Result<u32, String> {
            v.trim()
                .parse()
                .map_err(|_| format!("{s:?}: {v:?} is not a whole number; {usage}"))
        };
        let (index, count) = (number(i)?, number(n)?);
        if count == 0 || count > MAX_SHARDS {
            return Err(format!(
                "{s:?}: the number of shards must be 1 to {MAX_SHARDS}"
            ));
        }
        if index >= count {
            return Err(format!(
                "{s:?}: shards are numbered from 0 to {}; {usage}",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }
}

/// Prometheus' `hashmod` of one value.
pub fn hashmod(value: &str, modulus: u32) -> u32 {
    let sum = Md5::digest(value.as_bytes());
    let mut low = [0u8; 8];
    low.copy_from_slice(&sum[8..16]);
    // The remainder is below `modulus`, a u32.
    (u64::from_be_bytes(low) % u64::from(modulus.max(1))) as u32
}

impl Shard {
    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    /// Whether the target named by `key` of `tenant` is this shard's.
    pub fn owns(&self, tenant: &str, key: &str) -> bool {
        self.count == 1 || hashmod(&format!("{tenant};{key}"), self.count) == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_prometheus_hashmod() {
        // md5(value)[8..16] read big-endian, modulo n: computed independently with Python's
        // hashlib for these values.
        for (value, modulus, want) in [
            (";1001", 2, 1),
            (";1002", 2, 0),
            ("acme;1001", 7, 1),
            ("globex;42", 5, 1),
            (";all", 4, 1),
            ("", 3, 1),
        ] {
            assert_eq!(hashmod(value, modulus), want, "{value} mod {modulus}");
        }
    }

    #[test]
    fn shards_parse_as_i_of_n_and_bad_ones_say_how_to_write_them() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!("0/1".parse::<Shard>(), Ok(Shard::default()));
        for (bad, says) in [
            ("3", "write it as i/n"),
            ("a/3", "\"a\" is not a whole number"),
            ("3/3", "numbered from 0 to 2"),
            ("0/0", "must be 1 to 10000"),
            ("0/10001", "must be 1 to 10000"),
            ("-1/3", "is not a whole number"),
        ] {
            let err = bad.parse::<Shard>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
