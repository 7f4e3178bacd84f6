//! SIGTERM and SIGINT stop `serve` and `replica` cleanly, as a client's
//! SHUTDOWN does: `systemctl stop`, `docker stop` and Ctrl-C send them.
//! Without this their default action ends the process at once, like kill
//! -9 (safe for what was made durable, but `--appendfsync everysec` loses
//! the last epoch or two of acknowledged writes).
//!
//! The signals are blocked in the main thread before any other starts, so
//! every thread inherits the mask and none is interrupted; one thread
//! takes them with `sigwait` and runs the stop ([`Stop`]). Before the
//! server serves (during its recovery, say) there is nothing to stop
//! cleanly, and the process exits at once, as it did before. A second
//! signal, while the stop is under way, ends the process at once.

use std::io;
use std::sync::{Arc, OnceLock};

/// SIGTERM and SIGINT, blocked in the calling thread and every thread it
/// starts afterwards. Call before the first thread is started.
pub struct Blocked(libc::sigset_t);

pub fn block() -> io::Result<Blocked> {
    // SAFETY: `set` is initialised by sigemptyset before it is read, and
    // every call gets a valid pointer to it.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(Blocked(set))
    }
}

/// What the first signal does: until [`Stop::arm`] gives it a stop, the
/// process exits at once (status 0): nothing is served yet, and a
/// recovery under way is simply done again at the next start.
#[derive(Clone, Default)]
pub struct Stop(Arc<OnceLock<Box<dyn Fn() + Send + Sync>>>);

impl Stop {
    /// From now on a signal runs `f` (once the server serves).
    pub fn arm(&self, f: impl Fn() + Send + Sync + 'static) {
        let _ = self.0.set(Box::new(f));
    }

    fn run(&self, what: &str) {
        match self.0.get() {
            Some(f) => f(),
            None => {
                ::log::info!("{what} was not serving yet: exiting");
                std::process::exit(0);
            }
        }
    }
}

impl Blocked {
    /// Runs `stop` on a thread of its own at the first signal; exits the
    /// process (status 1) at the second. Call before anything slow (a
    /// recovery), so that a signal then ends it.
    pub fn on_signal(self, what: &'static str, stop: Stop) -> io::Result<()> {
        let wait = move || -> libc::c_int {
            let mut sig = 0;
            // SAFETY: the set was built by `block`; `sig` is a valid out
            // pointer. sigwait only fails for an invalid set.
            while unsafe { libc::sigwait(&self.0, &mut sig) } != 0 {}
            sig
        };
        std::thread::Builder::new().name("epochdb-signals".into()).spawn(move || {
            let name = |sig| if sig == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
            // Waited for outside the log macros, which skip their arguments
            // below the log level.
            let first = name(wait());
            ::log::info!("{first}: stopping {what} cleanly (again to stop at once)");
            std::thread::spawn(move || stop.run(what));
            let second = name(wait());
            ::log::warn!("{second}: stopping at once");
            std::process::exit(1);
        })?;
        Ok(())
    }
}
