//! Random numbers and key choosers for the workloads.
//!
//! - [`Rng`]: xorshift64*, seeded per thread, so runs are reproducible.
//! - [`Zipfian`]: Gray et al.'s generator as YCSB uses it (theta 0.99 by
//!   default), scrambled by an FNV hash so hot keys spread over the range.
//! - [`Chooser::Hotspot`]: the NVM study's skews: a fraction of the accesses
//!   go to a fraction of the keys (low: 50% to 20%, high: 90% to 10%).

/// xorshift64* (Vigna): fast, 64-bit state, good enough for workloads.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, so nearby seeds diverge and 0 is fine.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (multiply-shift, no modulo bias worth measuring).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    #[inline]
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `percent / 100`.
    #[inline]
    pub fn percent(&mut self, percent: u32) -> bool {
        self.below(100) < percent as u64
    }
}

/// Zipfian ranks in `0..n`: rank 0 is the most popular (Gray et al.,
/// "Quickly generating billion-record synthetic databases", as in YCSB).
#[derive(Debug, Clone)]
pub struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipfian {
    pub fn new(n: u64, theta: f64) -> Zipfian {
        assert!(n >= 2 && theta > 0.0 && theta < 1.0, "zipfian needs n >= 2 and 0 < theta < 1");
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2, theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian { n, theta, alpha: 1.0 / (1.0 - theta), zetan, eta }
    }

    /// A rank in `0..n`.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        ((self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64).min(self.n - 1)
    }

    /// The probability of rank 0.
    pub fn top_probability(&self) -> f64 {
        1.0 / self.zetan
    }
}

/// FNV-1a of a 64-bit number: YCSB's scrambler.
#[inline]
pub fn fnv64(x: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in x.to_le_bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01B3);
    }
    h
}

/// How a workload picks which existing key to touch.
#[derive(Debug, Clone)]
pub enum Chooser {
    Uniform,
    /// Scrambled Zipfian over the loaded keys.
    Zipfian(Zipfian),
    /// `ops_percent`% of the accesses go to the first `keys_percent`% of
    /// the keys, the rest to the others, uniformly within each set.
    Hotspot {
        ops_percent: u32,
        keys_percent: u32,
    },
    /// YCSB-D: Zipfian over recency, the newest keys most popular.
    Latest(Zipfian),
}

impl Chooser {
    /// A key id in `0..n` (`n` = keys present now).
    #[inline]
    pub fn choose(&self, rng: &mut Rng, n: u64) -> u64 {
        match self {
            Chooser::Uniform => rng.below(n),
            Chooser::Zipfian(z) => fnv64(z.next(rng)) % n,
            Chooser::Hotspot { ops_percent, keys_percent } => {
                let hot = (n * *keys_percent as u64 / 100).clamp(1, n);
                if hot == n || rng.percent(*ops_percent) {
                    rng.below(hot)
                } else {
                    hot + rng.below(n - hot)
                }
            }
            Chooser::Latest(z) => n - 1 - z.next(rng).min(n - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_covers_the_range_evenly() {
        let mut rng = Rng::new(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[rng.below(10) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        assert!((0..1000).all(|_| rng.range(5, 7) >= 5));
    }

    #[test]
    fn zipfian_has_the_expected_skew() {
        let z = Zipfian::new(1000, 0.99);
        let mut rng = Rng::new(2);
        let mut counts = vec![0u32; 1000];
        let draws = 200_000;
        for _ in 0..draws {
            counts[z.next(&mut rng) as usize] += 1;
        }
        let top = counts[0] as f64 / draws as f64;
        assert!((top - z.top_probability()).abs() < 0.01, "rank 0: {top} vs {}", z.top_probability());
        // Popularity falls with rank: each decade of ranks gets less per key.
        let per_key = |lo: usize, hi: usize| counts[lo..hi].iter().sum::<u32>() as f64 / (hi - lo) as f64;
        assert!(per_key(0, 10) > per_key(10, 100) && per_key(10, 100) > per_key(100, 1000));
        // Ranks 1..=10 follow 1/i^theta relative to rank 0, roughly.
        for i in 1..10 {
            let want = 1.0 / ((i + 1) as f64).powf(0.99);
            let got = counts[i] as f64 / counts[0] as f64;
            assert!((got - want).abs() < 0.08, "rank {i}: {got} vs {want}");
        }
    }

    #[test]
    fn hotspot_sends_the_right_share_to_the_hot_set() {
        for (ops, keys) in [(50, 20), (90, 10)] {
            let c = Chooser::Hotspot { ops_percent: ops, keys_percent: keys };
            let mut rng = Rng::new(3);
            let n = 10_000;
            let draws = 200_000;
            let hot = (0..draws).filter(|_| c.choose(&mut rng, n) < n * keys as u64 / 100).count();
            let share = hot as f64 / draws as f64 * 100.0;
            assert!((share - ops as f64).abs() < 1.0, "{ops}/{keys}: {share}%");
        }
    }

    #[test]
    fn choosers_stay_in_range() {
        let mut rng = Rng::new(4);
        let all = [
            Chooser::Uniform,
            Chooser::Zipfian(Zipfian::new(100, 0.99)),
            Chooser::Hotspot { ops_percent: 90, keys_percent: 10 },
            Chooser::Latest(Zipfian::new(100, 0.99)),
        ];
        for c in &all {
            for n in [1u64, 2, 7, 100, 5000] {
                assert!((0..2000).all(|_| c.choose(&mut rng, n) < n), "{c:?} n={n}");
            }
        }
    }
}
