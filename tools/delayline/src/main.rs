//! serverlab's delay line (the execution stage's shaped link where the kernel has no netem).
//!
//! An IP forwarder between two TUN devices, one in the client's network namespace and one
//! in the server's. Each packet is held for the one-way delay, paced at the link's rate and
//! dropped at random at the loss rate, then written to the other side unchanged: TCP stays
//! end to end, so the server sees the real round trip and the real flow control.
//!
//! Every packet's release time is `start + serialization + delay`, where `start` is the
//! later of its arrival and the moment the link is free. Release times therefore grow with
//! arrival order in each direction, so each direction's queue is a FIFO ordered by release
//! time (nothing is reordered), and one timerfd armed at the earliest head, at an absolute
//! deadline, wakes the loop: no sleep per packet, and no drift from relative timeouts.
//!
//! Usage: serverlab-delayline --client-ns PATH --server-ns PATH --client-tun NAME
//!        --server-tun NAME [--delay-ms F] [--rate-mbit F] [--loss-pct F] [--seed N]
//! It prints `ready` once both devices exist, and on SIGTERM or SIGINT one JSON line of
//! counts and its own CPU time, then exits; its devices vanish with it.

use std::collections::VecDeque;
use std::ffi::CString;
use std::io::{self, Write};
use std::os::raw::c_int;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const MAX_PACKET: usize = 65536;
// The link's buffer, as a router's: 100 ms of traffic at the rate, at least 64 KiB.
const QUEUE_S: f64 = 0.1;
const MIN_QUEUE_BYTES: f64 = 65536.0;
// Packets read per device per wake, so that one busy direction cannot starve the other.
const READ_BATCH: usize = 64;
// Low among real-time priorities: above every normal process, below the kernel's own threads.
const RT_PRIORITY: c_int = 10;

struct Config {
    client_ns: String,
    server_ns: String,
    client_tun: String,
    server_tun: String,
    delay_ns: u64,
    rate_bps: f64,
    loss: f64,
    seed: u64,
}

fn parse_args() -> Result<Config, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = Config {
        client_ns: String::new(),
        server_ns: String::new(),
        client_tun: String::new(),
        server_tun: String::new(),
        delay_ns: 0,
        rate_bps: 0.0,
        loss: 0.0,
        seed: 1,
    };
    for pair in args.chunks(2) {
        let [key, value] = pair else {
            return Err(format!("{} needs a value", pair[0]));
        };
        let number = || {
            value
                .parse::<f64>()
                .map_err(|_| format!("{key}: not a number: {value}"))
        };
        match key.as_str() {
            "--client-ns" => config.client_ns = value.clone(),
            "--server-ns" => config.server_ns = value.clone(),
            "--client-tun" => config.client_tun = value.clone(),
            "--server-tun" => config.server_tun = value.clone(),
            "--delay-ms" => config.delay_ns = (number()? * 1e6) as u64,
            "--rate-mbit" => config.rate_bps = number()? * 1e6,
            "--loss-pct" => config.loss = number()? / 100.0,
            "--seed" => config.seed = number()? as u64,
            _ => return Err(format!("unknown option {key}")),
        }
    }
    if config.client_ns.is_empty() || config.server_ns.is_empty() {
        return Err("--client-ns and --server-ns are required".into());
    }
    if config.client_tun.is_empty() || config.server_tun.is_empty() {
        return Err("--client-tun and --server-tun are required".into());
    }
    if !(0.0..=1.0).contains(&config.loss) || config.rate_bps < 0.0 {
        return Err("--loss-pct must be within 0..100 and --rate-mbit not negative".into());
    }
    Ok(config)
}

fn check(result: c_int, what: &str) -> io::Result<c_int> {
    if result < 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::new(err.kind(), format!("{what}: {err}")));
    }
    Ok(result)
}

/// Opens a new TUN device (no packet-info header) named `name` in the namespace at `ns`:
/// the device lives in the namespace this thread is in when it is made.
fn open_tun_in(ns: &str, name: &str) -> io::Result<c_int> {
    let path = CString::new(ns).map_err(|_| io::Error::other("bad namespace path"))?;
    unsafe {
        let ns_fd = check(
            libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC),
            ns,
        )?;
        let entered = libc::setns(ns_fd, libc::CLONE_NEWNET);
        libc::close(ns_fd);
        check(entered, "setns")?;
        let dev = c"/dev/net/tun";
        let flags = libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC;
        let fd = check(libc::open(dev.as_ptr(), flags), "/dev/net/tun")?;
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(name.bytes().take(15)) {
            *slot = byte as libc::c_char;
        }
        request.ifr_ifru.ifru_flags = IFF_TUN | IFF_NO_PI;
        check(libc::ioctl(fd, TUNSETIFF, &request), "TUNSETIFF")?;
        Ok(fd)
    }
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// splitmix64: a seeded generator, so that a run's losses can be reproduced.
struct Random(u64);

impl Random {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One direction of the link: what it reads from, writes to, and holds meanwhile.
struct Direction {
    from: c_int,
    to: c_int,
    queue: VecDeque<(u64, Vec<u8>)>,
    link_free_ns: u64,
    forwarded: u64,
    lost: u64,
    overflowed: u64,
}

impl Direction {
    fn new(from: c_int, to: c_int) -> Self {
        Direction {
            from,
            to,
            queue: VecDeque::new(),
            link_free_ns: 0,
            forwarded: 0,
            lost: 0,
            overflowed: 0,
        }
    }

    /// Schedules one packet that arrived at `now`, or drops it (loss, or a full buffer).
    fn admit(&mut self, packet: Vec<u8>, now: u64, link: &Link, random: &mut Random) {
        if link.loss > 0.0 && random.unit() < link.loss {
            self.lost += 1;
            return;
        }
        let start = now.max(self.link_free_ns);
        if start - now > link.queue_ns {
            self.overflowed += 1; // tail drop, as a router's full buffer does
            return;
        }
        self.link_free_ns = start + link.serialization_ns(packet.len());
        self.queue
            .push_back((self.link_free_ns + link.delay_ns, packet));
    }

    fn read_ready(&mut self, link: &Link, random: &mut Random, buffer: &mut [u8]) {
        for _ in 0..READ_BATCH {
            let n = unsafe { libc::read(self.from, buffer.as_mut_ptr().cast(), buffer.len()) };
            if n <= 0 {
                return; // EAGAIN: drained
            }
            self.admit(buffer[..n as usize].to_vec(), now_ns(), link, random);
        }
    }

    /// Writes every packet whose time has come; returns the next release time, if any.
    fn release_due(&mut self, now: u64) -> Option<u64> {
        while let Some((release, _)) = self.queue.front() {
            if *release > now {
                return Some(*release);
            }
            let (_, packet) = self.queue.pop_front().unwrap();
            let n = unsafe { libc::write(self.to, packet.as_ptr().cast(), packet.len()) };
            if n == packet.len() as isize {
                self.forwarded += 1;
            } else {
                self.overflowed += 1;
            }
        }
        None
    }
}

struct Link {
    delay_ns: u64,
    rate_bps: f64,
    loss: f64,
    queue_ns: u64,
}

impl Link {
    fn new(config: &Config) -> Self {
        let queue_ns = if config.rate_bps > 0.0 {
            let queue_s = QUEUE_S.max(MIN_QUEUE_BYTES * 8.0 / config.rate_bps);
            (queue_s * 1e9) as u64
        } else {
            u64::MAX
        };
        Link {
            delay_ns: config.delay_ns,
            rate_bps: config.rate_bps,
            loss: config.loss,
            queue_ns,
        }
    }

    /// How long the packet occupies the link at its rate (0 when the rate is unlimited).
    fn serialization_ns(&self, bytes: usize) -> u64 {
        if self.rate_bps > 0.0 {
            (bytes as f64 * 8.0 * 1e9 / self.rate_bps) as u64
        } else {
            0
        }
    }
}

/// The loop's wake-up sources: both devices, the release timer, and SIGTERM/SIGINT.
struct Waker {
    epoll: c_int,
    timer: c_int,
    signals: c_int,
}

impl Waker {
    fn new(devices: [c_int; 2]) -> io::Result<Self> {
        unsafe {
            let epoll = check(libc::epoll_create1(libc::EPOLL_CLOEXEC), "epoll_create1")?;
            let timer = check(
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                ),
                "timerfd_create",
            )?;
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut mask);
            libc::sigaddset(&mut mask, libc::SIGTERM);
            libc::sigaddset(&mut mask, libc::SIGINT);
            libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
            let signals = check(libc::signalfd(-1, &mask, libc::SFD_CLOEXEC), "signalfd")?;
            for fd in [devices[0], devices[1], timer, signals] {
                let mut event = libc::epoll_event {
                    events: libc::EPOLLIN as u32,
                    u64: fd as u64,
                };
                check(
                    libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, fd, &mut event),
                    "epoll_ctl",
                )?;
            }
            Ok(Waker {
                epoll,
                timer,
                signals,
            })
        }
    }

    /// Arms the timer at an absolute monotonic deadline, or disarms it (None).
    fn arm(&self, deadline_ns: Option<u64>) {
        let at = deadline_ns.unwrap_or(0);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at / 1_000_000_000) as libc::time_t,
                tv_nsec: (at % 1_000_000_000) as libc::c_long,
            },
        };
        let flags = if deadline_ns.is_some() {
            libc::TFD_TIMER_ABSTIME
        } else {
            0
        };
        unsafe { libc::timerfd_settime(self.timer, flags, &spec, std::ptr::null_mut()) };
    }

    /// Waits for the next wake; returns the ready descriptors.
    fn wait(&self) -> Vec<c_int> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        let n = unsafe { libc::epoll_wait(self.epoll, events.as_mut_ptr(), 8, -1) };
        let mut ready: Vec<c_int> = events[..n.max(0) as usize]
            .iter()
            .map(|e| e.u64 as c_int)
            .collect();
        if ready.contains(&self.timer) {
            let mut expirations = 0u64;
            unsafe { libc::read(self.timer, (&mut expirations as *mut u64).cast(), 8) };
            ready.retain(|fd| *fd != self.timer);
        }
        ready
    }
}

fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Asks for a real-time priority, as netem has by running in the kernel's softirq: on a
/// loaded machine a normal process is woken late, so its packets wait in the TUN queue
/// (delaying them more than asked, or overflowing it). Returns whether it was granted.
fn realtime() -> bool {
    let param = libc::sched_param {
        sched_priority: RT_PRIORITY,
    };
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

fn report(up: &Direction, down: &Direction, realtime: bool) {
    println!(
        "{{\"forwarded\": [{}, {}], \"lost\": [{}, {}], \"overflowed\": [{}, {}], \"cpu_s\": {:.6}, \"realtime\": {}}}",
        up.forwarded,
        down.forwarded,
        up.lost,
        down.lost,
        up.overflowed,
        down.overflowed,
        cpu_seconds(),
        realtime
    );
}

fn run(config: Config) -> io::Result<()> {
    // Timers fire when asked, not up to 50 us late (the default slack).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let realtime = realtime();
    let client = open_tun_in(&config.client_ns, &config.client_tun)?;
    let server = open_tun_in(&config.server_ns, &config.server_tun)?;
    let link = Link::new(&config);
    let mut random = Random(config.seed);
    let mut up = Direction::new(client, server);
    let mut down = Direction::new(server, client);
    let waker = Waker::new([client, server])?;
    // One buffer for every read; each packet keeps only its own bytes.
    let mut buffer = vec![0u8; MAX_PACKET];
    println!("ready");
    io::stdout().flush()?;
    loop {
        let ready = waker.wait();
        if ready.contains(&waker.signals) {
            report(&up, &down, realtime);
            return Ok(());
        }
        if ready.contains(&client) {
            up.read_ready(&link, &mut random, &mut buffer);
        }
        if ready.contains(&server) {
            down.read_ready(&link, &mut random, &mut buffer);
        }
        let now = now_ns();
        let next = [up.release_due(now), down.release_due(now)];
        waker.arm(next.iter().flatten().min().copied());
    }
}

fn main() {
    let config = match parse_args() {
        Ok(config) => config,
        Err(message) => {
            eprintln!("serverlab-delayline: {message}");
            std::process::exit(2);
        }
    };
    if let Err(err) = run(config) {
        eprintln!("serverlab-delayline: {err}");
        std::process::exit(1);
    }
}
