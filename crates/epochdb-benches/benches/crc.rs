//! CRC32C implementations on log-block sizes: the hand-written
//! one epochdb used until then (one dependent chain of the SSE4.2 `crc32`
//! instruction, copied here so the comparison stays reproducible), the
//! `crc32c` crate (three interleaved chains, combined), and the `crc` crate
//! (tables only). `cargo bench -p epochdb-benches --bench crc`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

/// The pre-#21 `epochdb::crc32c::extend`, x86-64 path.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn one_chain(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut c = !crc as u64;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        c = _mm_crc32_u64(c, u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
    }
    let mut c = c as u32;
    for &b in words.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    !c
}

fn crc(c: &mut Criterion) {
    let table = crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);
    for size in [4096usize, 512 << 10] {
        let data: Vec<u8> = (0..size).map(|i| (i * 131 + 7) as u8).collect();
        let mut g = c.benchmark_group(format!("crc32c {} KiB", size >> 10));
        g.throughput(Throughput::Bytes(size as u64));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE4.2, checked just above.
            g.bench_function("hand-written, one chain", |b| b.iter(|| unsafe { one_chain(0, black_box(&data)) }));
        }
        g.bench_function("crc32c crate", |b| b.iter(|| crc32c::crc32c(black_box(&data))));
        g.bench_function("epochdb::crc32c", |b| b.iter(|| epochdb::crc32c::checksum(black_box(&data))));
        g.bench_function("crc crate (slice-by-16 tables)", |b| b.iter(|| table.checksum(black_box(&data))));
        g.finish();
    }
}

criterion_group!(benches, crc);
criterion_main!(benches);
