//! Crash-test children: the test binary re-run as a child process that
//! runs one entry-point test, then killed with SIGKILL.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts this test binary again, running only the test `entry_point`,
/// with the environment `env` (which tells it it is a child).
pub fn spawn(entry_point: &str, env: &[(&str, String)]) -> Child {
    let mut command = Command::new(std::env::current_exe().expect("exe"));
    command
        .args(["--exact", entry_point, "--nocapture", "--test-threads", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command.spawn().expect("spawn child")
}

/// Lets `child` run for `lifetime`, then kills it with SIGKILL and reaps
/// it. A child that exited by itself is a failure of the test.
pub fn kill_after(mut child: Child, lifetime: Duration, name: &str) {
    std::thread::sleep(lifetime);
    if let Ok(Some(status)) = child.try_wait() {
        panic!("{name} exited early: {status}");
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
}

/// The crash tests' loop. For each run (`default_runs`, or
/// `EPOCHDB_CRASH_ITERATIONS`): `start(run)` starts a child (and may wait
/// for it to be ready), which lives for `lifetime()` and is killed with
/// SIGKILL; then `check(run)` recovers, checks, and returns how many
/// acknowledgements it checked. The last check must have seen more than
/// 100, or the children did too little for the test to mean anything.
/// Ends with one summary line (`crash campaign NAME: ...`), which
/// `scripts/crash-campaign.sh` adds up.
pub fn kill_and_check(
    name: &str,
    default_runs: u64,
    mut start: impl FnMut(u64) -> Child,
    mut lifetime: impl FnMut() -> Duration,
    mut check: impl FnMut(u64) -> usize,
) {
    let runs = std::env::var("EPOCHDB_CRASH_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(default_runs);
    let (mut checked, mut total) = (0, 0);
    let began = Instant::now();
    for run in 1..=runs {
        let child = start(run);
        let life = lifetime();
        kill_after(child, life, &format!("child {run}"));
        let started = Instant::now();
        checked = check(run);
        total += checked;
        eprintln!(
            "run {run}: killed after {life:?}; recovered and checked {checked} acknowledgements in {:?}",
            started.elapsed()
        );
    }
    eprintln!(
        "crash campaign {name}: {runs} kills, {total} acknowledgements checked, {:.1} s",
        began.elapsed().as_secs_f64()
    );
    assert!(checked > 100, "the children acknowledged too little to mean anything: {checked}");
}

/// The complete lines of every `acks.*` side file in `dir`: a child appends
/// a line per acknowledgement, and a kill may cut its last line short.
pub fn ack_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("acks.")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("acks");
        lines.extend(text.split_inclusive('\n').filter(|l| l.ends_with('\n')).map(|l| l.trim_end().to_string()));
    }
    lines
}

/// A child's side file of acknowledgements (`dir/acks.<name>`, read back by
/// [`ack_lines`]): lines wait in `pending` with their transaction's epoch
/// and are written once that epoch is durable.
pub struct Acks {
    file: std::fs::File,
    pending: Vec<(u64, String)>,
}

impl Acks {
    pub fn open(dir: &Path, name: &str) -> Acks {
        let path = dir.join(format!("acks.{name}"));
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("acks file");
        Acks { file, pending: Vec::new() }
    }

    /// Acknowledges `line` once epoch `epoch` is durable.
    pub fn push(&mut self, epoch: u64, line: String) {
        self.pending.push((epoch, line));
    }

    /// Acknowledges `line` now (its transaction is known durable).
    pub fn write_now(&mut self, line: &str) {
        self.file.write_all(format!("{line}\n").as_bytes()).expect("ack");
    }

    /// Writes the pending lines of epochs `<= durable`.
    pub fn flush(&mut self, durable: u64) {
        let n = self.pending.iter().take_while(|p| p.0 <= durable).count();
        if n > 0 {
            let lines: String = self.pending.drain(..n).map(|p| p.1 + "\n").collect();
            self.file.write_all(lines.as_bytes()).expect("ack");
        }
    }
}
