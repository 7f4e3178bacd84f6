//! Criterion micro-benchmarks of the epochdb engine, in `benches/`:
//! `cargo bench -p epochdb-benches [--bench index|commit|crc|recovery]`.
//! The library is empty; the crate exists so that the benchmarks' own
//! dependencies stay out of the engine's test build.
