//! rust-zhtta: the seed 001 zhtta web server, with its versions as tunables.

mod app;
mod clock;
mod config;
mod control;
mod files;
mod grpc;
mod http;
mod lab;
mod push;
mod server;
#[cfg(test)]
mod spec_vectors;
mod stats;
mod stream;
mod syslog;
mod syslogparse;
mod threads;
mod tls;
mod upload;

use app::App;
use config::{Command, Config, USAGE};
use files::FileService;
use push::PushHub;
use server::Listener;
use socket2::{Domain, Socket, Type};
use stats::Stats;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Instant;
use threads::ThreadBudget;

pub const NAME: &str = "rust-zhtta";
pub const SPEC_VERSION: &str = "3.4";
/// Deep enough for a connect burst of 10,000 clients (seed 003); the kernel caps it at
/// net.core.somaxconn.
const LISTEN_BACKLOG: i32 = 65_535;
/// Where the descriptor limit is raised to when allowed, for 20,000+ held connections.
const WANTED_FILES: u64 = 1 << 20;
/// Threads outside the connection budget besides the responders: main, syslog, emitters.
const FIXED_THREADS: usize = 64;

fn main() -> ExitCode {
    match Command::from_args(std::env::args().skip(1)) {
        Ok(Command::Version) => {
            println!("{}", env!("ZHTTA_VERSIONS"));
            ExitCode::SUCCESS
        }
        Ok(Command::Serve(config)) => match run(config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("{NAME}: {error}");
                ExitCode::FAILURE
            }
        },
        Err(error) => {
            eprintln!("{NAME}: {error}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(config: Config) -> std::io::Result<()> {
    raise_file_limit();
    let stats: &'static Stats = Box::leak(Box::default());
    let thread_limit = config
        .connection_threads
        .unwrap_or_else(|| threads::automatic_limit(config.responders + FIXED_THREADS));
    let threads: &'static ThreadBudget = Box::leak(Box::new(ThreadBudget::new(thread_limit)));
    let tls = match &config.tls {
        Some(files) => Some(tls::load(&files.cert, &files.key).map_err(std::io::Error::other)?),
        None => None,
    };
    // Syslog first: once the HTTP port (the one a client waits for) takes connections,
    // every port does.
    stats
        .syslog_parse_mode
        .store(config.syslog_parse, std::sync::atomic::Ordering::Relaxed);
    for &address in &config.addresses {
        if let Some(port) = config.syslog_port {
            syslog::start(address, port, stats, threads)?;
        }
        if let (Some(port), Some(tls)) = (config.tls.as_ref().and_then(|t| t.syslog_port), &tls) {
            syslog::start_tls(listen(address, port)?, &tls.syslog, stats, threads)?;
        }
    }
    let grpc_listeners = grpc_listeners(&config)?;
    let listeners = http_listeners(&config, tls.as_ref())?;
    eprintln!(
        "{NAME}: {:?} port {}, read {:?}, {} responder(s), {:?} queue, up to {} connection threads",
        config.addresses,
        config.port,
        config.read,
        config.responders,
        config.schedule,
        threads.limit()
    );
    // The server lives as long as the process, so its state is leaked once and shared
    // as plain references by every thread.
    let app: &'static App = Box::leak(Box::new(App {
        stats,
        threads,
        files: FileService::start(&config, stats)?,
        push: PushHub::new(stats),
        logging: AtomicBool::new(false),
        started: Instant::now(),
    }));
    let tls_files = config
        .tls
        .as_ref()
        .map(|t| (t.cert.as_path(), t.key.as_path()));
    grpc::start(app, grpc_listeners, tls_files)?;
    server::accept_loops(app, listeners)
}

/// The HTTP port on every address, and the HTTPS port when TLS is on (spec §12).
fn http_listeners(
    config: &Config,
    tls: Option<&tls::TlsConfigs>,
) -> std::io::Result<Vec<Listener>> {
    let mut listeners = Vec::new();
    for &address in &config.addresses {
        let tcp = listen(address, config.port)?;
        listeners.push(Listener { tcp, tls: None });
        if let (Some(port), Some(tls)) = (config.tls.as_ref().and_then(|t| t.port), tls) {
            let tcp = listen(address, port)?;
            let tls = Some(std::sync::Arc::clone(&tls.https));
            listeners.push(Listener { tcp, tls });
        }
    }
    Ok(listeners)
}

/// tonic's ports on every address (spec §16): prior knowledge, and TLS when it is on.
fn grpc_listeners(config: &Config) -> std::io::Result<grpc::GrpcListeners> {
    let mut listeners = grpc::GrpcListeners {
        plain: Vec::new(),
        tls: Vec::new(),
    };
    for &address in &config.addresses {
        if let Some(port) = config.grpc_port {
            listeners.plain.push(listen(address, port)?);
        }
        if let Some(port) = config.tls.as_ref().and_then(|t| t.grpc_port) {
            listeners.tls.push(listen(address, port)?);
        }
    }
    Ok(listeners)
}

fn listen(address: IpAddr, port: u16) -> std::io::Result<TcpListener> {
    let address = SocketAddr::from((address, port));
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// As many descriptors as the system allows this process; failure only lowers the
/// number of connections the server can hold.
fn raise_file_limit() {
    let Ok((_, hard)) = rlimit::Resource::NOFILE.get() else {
        return;
    };
    if hard < WANTED_FILES
        && rlimit::Resource::NOFILE
            .set(WANTED_FILES, WANTED_FILES)
            .is_ok()
    {
        return;
    }
    let _ = rlimit::Resource::NOFILE.set(hard, hard);
}
