//! SIGTERM and SIGINT stop `serve` and `replica` cleanly, as a client's
//! SHUTDOWN does: `systemctl stop`, `docker stop` and Ctrl-C send them.
//! Without this their default action ends the process at once, like kill
//! -9 (safe for what was made durable, but `--appendfsync everysec` loses
//! the last epoch or two of acknowledged writes).
//!
//! The signals are blocked in the main thread before any other starts, so
//! every thread inherits the mask and none is interrupted; one thread
//! takes them with `sigwait` and runs the stop. A second signal, while
//! the stop is under way, ends the process at once.

use std::io;

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

impl Blocked {
    /// Runs `stop` on a thread of its own at the first signal; exits the
    /// process (status 1) at the second.
    pub fn on_signal(self, what: &'static str, stop: impl FnOnce() + Send + 'static) -> io::Result<()> {
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
            std::thread::spawn(stop);
            let second = name(wait());
            ::log::warn!("{second}: stopping at once");
            std::process::exit(1);
        })?;
        Ok(())
    }
}
