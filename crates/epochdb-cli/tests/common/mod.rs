//! What the process tests share: a spawned `epochdb` whose stderr is kept
//! (shown when a test fails), and Redis clients that write until their
//! server dies and say what was acknowledged.

#![allow(dead_code)] // each test file uses a part

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Lines, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

// One helper for the process tests of both crates (control.rs uses it too).
#[path = "../../../epochdb-control/tests/ports/mod.rs"]
mod ports;
pub use ports::free_port;

/// A running `epochdb serve`, its port, and what it wrote to stderr.
pub struct Served {
    pub child: Child,
    pub port: u16,
    pub stderr: Arc<Mutex<String>>,
}

impl Served {
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Served {
    /// Sends `signal` (SIGTERM, SIGINT) and waits up to 60 s for the exit.
    pub fn signal_and_wait(&mut self, signal: i32) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signal) }, 0);
        self.wait_exit(std::time::Duration::from_secs(60))
    }

    /// Its exit status, once it exits within `within` (else the test fails).
    pub fn wait_exit(&mut self, within: std::time::Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "still running after {within:?}: {}", self.log());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A test that fails (or ends) leaves no server running behind it.
impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `epochdb <args>`: the child, its stderr as it comes (read by a
/// thread), and its stdout's lines.
pub fn spawn(args: &[OsString]) -> (Child, Arc<Mutex<String>>, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_epochdb"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start epochdb");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut pipe = child.stderr.take().unwrap();
    let sink = stderr.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, stderr, lines)
}

/// What a writer had acknowledged when its server died: the last value
/// of its key `w<n>`, and how many of its INCRs of `total` were answered.
pub type Acked = (Option<u64>, i64);

/// Four clients that run until the server dies: each SETs `w<n>` to
/// `base`, `base + 1`, ... and INCRs `total` after each SET.
pub fn start_writers(addr: &str, base: u64) -> Vec<std::thread::JoinHandle<Acked>> {
    (0..4u64)
        .map(|w| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(addr).unwrap().get_connection().unwrap();
                let mut acked = (None, 0);
                for i in base.. {
                    let r: redis::RedisResult<()> = redis::cmd("SET").arg(format!("w{w}")).arg(i).query(&mut c);
                    if r.is_err() {
                        break;
                    }
                    acked.0 = Some(i);
                    let r: redis::RedisResult<i64> = redis::cmd("INCR").arg("total").query(&mut c);
                    if r.is_err() {
                        break;
                    }
                    acked.1 += 1;
                }
                acked
            })
        })
        .collect()
}

pub fn join_writers(writers: Vec<std::thread::JoinHandle<Acked>>, server: &Served) -> Vec<Acked> {
    (writers.into_iter())
        .map(|t| t.join().unwrap_or_else(|_| panic!("a writer failed; the server said: {}", server.log())))
        .collect()
}
