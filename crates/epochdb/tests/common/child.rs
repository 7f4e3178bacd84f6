//! Crash-test children: the test binary re-run as a child process that
//! runs one entry-point test, then killed with SIGKILL. Used by the
//! engine's crash test and by the workloads' TPC-C crash test, which
//! includes this file by path.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
