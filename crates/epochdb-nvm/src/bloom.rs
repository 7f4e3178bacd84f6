//! Bloom filters of the LSM engines' runs (NVM study §3.3, §4.3): a lookup
//! skips a run whose filter says the key is not in it. 10 bits per key
//! and 7 probes, for about 1% false positives.

const BITS_PER_KEY: usize = 10;
const PROBES: u64 = 7;

/// 64-bit FNV-1a, then a finalizer so nearby keys spread.
fn hash(key: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in key {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ h >> 33
}

/// The filter's bits, as stored (FORMAT.md, "Log files").
#[derive(Debug, Clone, Default)]
pub struct Bloom {
    pub bits: Vec<u8>,
}

impl Bloom {
    pub fn with_keys(keys: usize) -> Bloom {
        Bloom { bits: vec![0; (keys * BITS_PER_KEY).div_ceil(8).max(8)] }
    }

    pub fn add(&mut self, key: &[u8]) {
        for p in probes(self.bits.len(), key) {
            self.bits[p / 8] |= 1 << (p % 8);
        }
    }

    pub fn may_contain(&self, key: &[u8]) -> bool {
        may_contain(&self.bits, key)
    }
}

/// Double hashing: probe i is bit `h1 + i * h2` of `bytes * 8`.
fn probes(bytes: usize, key: &[u8]) -> impl Iterator<Item = usize> {
    let h = hash(key);
    let (h1, h2) = (h, h.rotate_left(32) | 1);
    let n = bytes as u64 * 8;
    (0..PROBES).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) % n) as usize)
}

/// Whether a filter's `bits` (in place, e.g. in NVM) admit `key`.
pub fn may_contain(bits: &[u8], key: &[u8]) -> bool {
    !bits.is_empty() && probes(bits.len(), key).all(|p| bits[p / 8] & 1 << (p % 8) != 0)
}

#[cfg(test)]
mod tests {
    use super::Bloom;

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        let mut b = Bloom::with_keys(10_000);
        for i in 0..10_000u32 {
            b.add(&i.to_be_bytes());
        }
        assert!((0..10_000u32).all(|i| b.may_contain(&i.to_be_bytes())));
        let false_positives = (10_000..110_000u32).filter(|i| b.may_contain(&i.to_be_bytes())).count();
        assert!(false_positives < 2_000, "{false_positives} false positives in 100,000");
    }
}
