//! A small deterministic generator for the tests (xorshift64): the same
//! runs every time, and no dependency. The integration tests include this
//! file too (`tests/common/mod.rs`).

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Up to `max - 1` random bytes.
    pub fn bytes(&mut self, max: u64) -> Vec<u8> {
        let n = self.below(max);
        (0..n).map(|_| self.next() as u8).collect()
    }
}
