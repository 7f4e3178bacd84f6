//! Crash-test children: the test binary re-run as a child process that
//! runs one entry-point test, then killed with SIGKILL.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where each living child's standard error goes, by process id: read
/// back if it exits by itself, so the failure says why.
static STDERR: Mutex<Option<HashMap<u32, PathBuf>>> = Mutex::new(None);

/// Starts this test binary again, running only the test `entry_point`,
/// with the environment `env` (which tells it it is a child). Its
/// standard error goes to a file under the temporary directory.
pub fn spawn(entry_point: &str, env: &[(&str, String)]) -> Child {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("epochdb-child-{}-{n}.stderr", std::process::id()));
    let stderr = std::fs::File::create(&path).expect("child's stderr file");
    let mut command = Command::new(std::env::current_exe().expect("exe"));
    command.args(["--exact", entry_point, "--nocapture", "--test-threads", "1"]).stdout(Stdio::null()).stderr(stderr);
    for (name, value) in env {
        command.env(name, value);
    }
    let child = command.spawn().expect("spawn child");
    let mut files = STDERR.lock().unwrap_or_else(|e| e.into_inner());
    files.get_or_insert_with(HashMap::new).insert(child.id(), path);
    child
}

/// Lets `child` run for `lifetime`, then kills it with SIGKILL and reaps
/// it. A child that exited by itself is a failure of the test, which
/// shows the end of what the child wrote to standard error.
pub fn kill_after(mut child: Child, lifetime: Duration, name: &str) {
    std::thread::sleep(lifetime);
    let stderr = STDERR.lock().unwrap_or_else(|e| e.into_inner()).as_mut().and_then(|f| f.remove(&child.id()));
    let said = match child.try_wait() {
        Ok(Some(status)) => Some(status),
        _ => {
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
            None
        }
    }
    .map(|status| {
        let text = stderr.as_ref().and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "{name} exited early: {status}; its standard error ends:\n{}",
            lines[lines.len().saturating_sub(30)..].join("\n")
        )
    });
    if let Some(p) = stderr {
        let _ = std::fs::remove_file(p);
    }
    if let Some(failure) = said {
        panic!("{failure}");
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const CHILD: &str = "EPOCHDB_TESTKIT_CHILD";

    /// In the child: says why, and exits before anyone kills it.
    #[test]
    fn child_that_exits_early() {
        if std::env::var_os(CHILD).is_some() {
            eprintln!("the reason it stopped");
            std::process::exit(3);
        }
    }

    #[test]
    fn a_child_that_exits_early_fails_with_the_end_of_its_stderr() {
        let mut child = spawn("child::tests::child_that_exits_early", &[(CHILD, "1".into())]);
        child.wait().expect("the child exits"); // kill_after then finds it gone
        let killed = std::panic::AssertUnwindSafe(|| kill_after(child, Duration::ZERO, "the child"));
        let failure = std::panic::catch_unwind(killed).expect_err("an early exit is a failure");
        let message = failure.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("exited early") && message.contains("the reason it stopped"), "{message}");
    }
}
