//! What the engine asks of the operating system for itself: descriptors, CPU accounting and
//! the wall clock.

/// Raises the soft RLIMIT_NOFILE to the hard limit (and the hard limit too when running as
/// root). Returns a reason the run is invalid when `needed` still does not fit.
pub fn raise_fd_limit(needed: u64) -> Vec<String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return vec![format!(
                "cannot read RLIMIT_NOFILE: {}",
                std::io::Error::last_os_error()
            )];
        }
        let wanted_max = limit.rlim_max.max(needed);
        let raised = libc::rlimit {
            rlim_cur: wanted_max,
            rlim_max: wanted_max,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
            let soft = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    if limit.rlim_cur < needed {
        return vec![format!(
            "file descriptor limit {} is below the {needed} this plan may hold open",
            limit.rlim_cur
        )];
    }
    Vec::new()
}

/// This host's clock now, in Unix milliseconds (with the microseconds as a fraction).
pub fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// User and system CPU seconds this process has used so far.
pub fn cpu_times() -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

/// Moves this thread into the network namespace `/var/run/netns/NAME` (setns(2) with
/// CLONE_NEWNET). Threads started afterwards inherit it, so call it before any other thread
/// or socket exists.
pub fn enter_netns(name: &str) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let path = std::path::Path::new("/var/run/netns").join(name);
    let file = std::fs::File::open(&path)
        .map_err(|e| format!("network namespace {name:?} ({}): {e}", path.display()))?;
    // SAFETY: setns only reads the descriptor, which stays open for the call.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        let err = std::io::Error::last_os_error();
        return Err(format!("cannot enter network namespace {name:?}: {err}"));
    }
    Ok(())
}

/// Sets a boolean socket option that socket2 has no setter for.
pub(crate) fn switch_on(
    socket: &socket2::Socket,
    level: libc::c_int,
    name: libc::c_int,
) -> std::io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: a valid socket descriptor and a pointer to an int that outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(socket),
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_limit_covers_a_modest_need() {
        assert!(raise_fd_limit(256).is_empty());
    }

    #[test]
    fn cpu_time_moves_forward() {
        let before = cpu_times();
        let began = std::time::Instant::now();
        let mut x = 0u64;
        // Spin until the kernel's accounting tick shows the work (or give up after 2 s).
        while cpu_times() == before {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            assert!(began.elapsed().as_secs() < 2, "CPU time never moved");
        }
        let after = cpu_times();
        assert!(after.0 + after.1 > before.0 + before.1);
    }
}
