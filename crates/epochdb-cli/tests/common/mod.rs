//! What the process tests share: a spawned `epochdb` whose stderr is kept
//! (shown when a test fails), and Redis clients that write until their
//! server dies and say what was acknowledged.

#![allow(dead_code)] // each test file uses a part

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Lines, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

#[allow(unused_imports)] // not every test file picks ports
pub use epochdb_testkit::ports::free_port;

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
    spawn_in(std::path::Path::new("."), args)
}

/// [`spawn`] in working directory `cwd`.
pub fn spawn_in(
    cwd: &std::path::Path,
    args: &[OsString],
) -> (Child, Arc<Mutex<String>>, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_epochdb"))
        .current_dir(cwd)
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

/// Reads `epochdb serve`'s stdout up to the line that names its address,
/// and returns the port (the server's log, `stderr`, if it exits first).
pub fn port_of(lines: &mut Lines<BufReader<ChildStdout>>, stderr: &Mutex<String>) -> u16 {
    loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let addr: std::net::SocketAddr = rest.split_whitespace().next().unwrap().parse().unwrap();
                    return addr.port();
                }
            }
            _ => panic!("epochdb serve exited before listening: {}", stderr.lock().unwrap()),
        }
    }
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

/// Starts `epochdb serve --port 0 <args>` in `cwd` and waits for the line
/// that names its port (a guessed port is racy: another test's server may
/// hold it).
pub fn serve_in(cwd: &std::path::Path, args: &[&str]) -> Served {
    serve_printing(cwd, args).0
}

/// [`serve_in`], and what the server prints on standard output after the
/// line naming its port (read by a thread, so it never blocks on a full
/// pipe).
pub fn serve_printing(cwd: &std::path::Path, args: &[&str]) -> (Served, Arc<Mutex<String>>) {
    let args: Vec<OsString> = ["serve", "--port", "0"].iter().chain(args).map(Into::into).collect();
    let (child, stderr, mut lines) = spawn_in(cwd, &args);
    let port = port_of(&mut lines, &stderr);
    let printed = Arc::new(Mutex::new(String::new()));
    let sink = printed.clone();
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| sink.lock().unwrap().push_str(&(l + "\n"))));
    (Served { child, port, stderr }, printed)
}

/// A fresh directory for one test, removed once it passed (kept after a
/// failure, to look at).
pub struct Scratch(pub std::path::PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("epochdb-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Served {
    /// A client connection (RESP2) to it.
    pub fn connect(&self) -> redis::Connection {
        let url = format!("redis://127.0.0.1:{}/", self.port);
        redis::Client::open(url).unwrap().get_connection().unwrap()
    }

    /// SHUTDOWN, and its exit.
    pub fn shutdown(mut self) {
        let mut c = self.connect();
        let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut c);
        let status = self.wait_exit(std::time::Duration::from_secs(60));
        assert!(status.success(), "{status}: {}", self.log());
    }
}
