//! Process-level crash test: a real child process runs a write-heavy
//! workload on files in /dev/shm, is killed with SIGKILL in the middle of
//! transactions, and the engine restarts from the files; the TPC-C
//! consistency conditions and the YCSB row count must hold.
//!
//! The child is this test binary again, started with `EPOCHDB_NVM_CHILD`
//! set, running [`child`].

use epochdb_nvm::testbed::{self, Config, Workload, ENGINES};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const CHILD: &str = "EPOCHDB_NVM_CHILD";

fn config(engine: &str, workload: Workload, dir: PathBuf) -> Config {
    Config {
        engine: engine.into(),
        workload,
        latency: "dram".into(),
        tuples: 20_000,
        partitions: 2,
        duration: Duration::ZERO,
        warmup: Duration::ZERO,
        dir,
        region_mib: 2048,
        progress: false,
    }
}

fn workloads() -> [Workload; 2] {
    [Workload::Tpcc, Workload::Ycsb { mix: "write-heavy".into(), skew: "high".into() }]
}

/// In the child: run the configuration named by the environment until
/// killed. In the parent, a no-op test.
#[test]
fn child() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let mut it = spec.splitn(4, ',');
    let (engine, w, n, dir) = (it.next(), it.next(), it.next(), it.next());
    let (Some(engine), Some(w), Some(n), Some(dir)) = (engine, w, n, dir) else { panic!("bad {CHILD}: {spec}") };
    let workload = workloads().into_iter().nth(w.parse().expect("workload")).expect("workload");
    let n = n.parse().expect("n");
    testbed::child(&config(engine, workload, dir.into()), n).expect("child");
}

/// Kills a child running each workload on `engine` after 300 and after
/// 3,000 transactions, and checks the restart.
fn sigkill_mid_run_then_restart_keeps_the_invariants(engine: &str) {
    let exe = std::env::current_exe().expect("exe");
    for (w, workload) in workloads().into_iter().enumerate() {
        for n in [300u64, 3000] {
            let dir = PathBuf::from(format!("/dev/shm/epochdb-nvm-kill-{}-{engine}-{w}", std::process::id()));
            let cfg = config(engine, workload.clone(), dir.clone());
            let mut cmd = Command::new(&exe);
            cmd.args(["--exact", "child", "--nocapture", "--test-threads", "1"]);
            cmd.env(CHILD, format!("{engine},{w},{n},{}", dir.display()));
            eprintln!("kill test: {engine} {workload:?} after {n}");
            let (_, problems) = testbed::recovery(&cfg, cmd).expect("recovery");
            assert!(problems.is_empty(), "{engine} {workload:?} after {n}: {problems:?}");
            std::fs::remove_dir_all(&dir).expect("clean up");
        }
    }
}

// One test per engine, so the harness runs them side by side.
macro_rules! per_engine {
    ($($test:ident: $engine:literal,)*) => {
        $(
            #[test]
            fn $test() {
                sigkill_mid_run_then_restart_keeps_the_invariants($engine);
            }
        )*

        #[test]
        fn every_engine_has_a_test() {
            assert_eq!(ENGINES, [$($engine),*]);
        }
    };
}

per_engine! {
    inp_keeps_its_invariants_after_sigkill: "inp",
    cow_keeps_its_invariants_after_sigkill: "cow",
    log_keeps_its_invariants_after_sigkill: "log",
    nvm_inp_keeps_its_invariants_after_sigkill: "nvm-inp",
    nvm_cow_keeps_its_invariants_after_sigkill: "nvm-cow",
    nvm_log_keeps_its_invariants_after_sigkill: "nvm-log",
}
