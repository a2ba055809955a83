//! Measurement aid (issue 22, item 3): where one held TLS connection's heap goes. A client
//! and a server rustls connection (ring, TLS 1.3 and 1.2, ECDSA P-256) shake hands in memory,
//! the server sends one SSE-sized record, and a counting allocator reports the heap the
//! *client* side holds after each step, with the sizes of its live blocks: first with the
//! buffered `ClientConnection`, then with the unbuffered API the engine uses. Nothing touches a
//! socket, so the figures are rustls's own, not the kernel's.
//!
//! Usage: cargo run --release --example tls_heap

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rustls::client::UnbufferedClientConnection;
use rustls::crypto::ring;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::unbuffered::ConnectionState;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

/// Live blocks allocated while the client side runs: (address, size), 0 = free slot.
const SLOTS: usize = 4096;
static mut LIVE: [(usize, usize); SLOTS] = [(0, 0); SLOTS];
static LOCK: AtomicBool = AtomicBool::new(false);
thread_local!(static TRACKING: Cell<bool> = const { Cell::new(false) });

struct Counting;

fn with_table<R>(f: impl FnOnce(&mut [(usize, usize); SLOTS]) -> R) -> R {
    while LOCK.swap(true, Ordering::Acquire) {}
    // SAFETY: the spin lock above gives this thread the table alone.
    let r = f(unsafe { &mut *std::ptr::addr_of_mut!(LIVE) });
    LOCK.store(false, Ordering::Release);
    r
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if TRACKING.with(Cell::get) {
            with_table(|t| {
                if let Some(slot) = t.iter_mut().find(|s| s.0 == 0) {
                    *slot = (p as usize, layout.size());
                }
            });
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        with_table(|t| {
            if let Some(slot) = t.iter_mut().find(|s| s.0 == p as usize) {
                *slot = (0, 0);
            }
        });
        unsafe { System.dealloc(p, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with the allocations it makes counted as the client's.
fn client<R>(f: impl FnOnce() -> R) -> R {
    TRACKING.with(|t| t.set(true));
    let r = f();
    TRACKING.with(|t| t.set(false));
    r
}

fn report(step: &str) {
    // Copied out first: allocating inside the lock would take it again (dealloc).
    let table = with_table(|t| *t);
    let mut sizes: Vec<usize> = table.iter().filter(|s| s.0 != 0).map(|s| s.1).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let total: usize = sizes.iter().sum();
    println!(
        "{step:<44} {total:>6} B in {:>3} blocks: {:?}",
        sizes.len(),
        sizes
    );
}

fn configs(tls12: bool) -> (Arc<ClientConfig>, Arc<ServerConfig>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
        &[&rustls::version::TLS12]
    } else {
        &[&rustls::version::TLS13]
    };
    let client = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_protocol_versions(versions)
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    (Arc::new(client), Arc::new(server))
}

/// Moves what `from` has to send into `to` (the transfer buffer is not the client's).
fn carry(from: &mut dyn FnMut(&mut Vec<u8>), to: &mut dyn FnMut(&[u8])) {
    let mut wire = Vec::new();
    from(&mut wire);
    if !wire.is_empty() {
        to(&wire);
    }
}

fn run(tls12: bool) {
    println!("-- TLS 1.{} --", if tls12 { 2 } else { 3 });
    let (cc, sc) = configs(tls12);
    let name = ServerName::try_from("localhost").unwrap();
    let mut c = client(|| Box::new(ClientConnection::new(cc.clone(), name).unwrap()));
    report("ClientConnection::new");
    let mut s = ServerConnection::new(sc).unwrap();
    while c.is_handshaking() || s.is_handshaking() || s.wants_write() || c.wants_write() {
        carry(
            &mut |w| {
                while c.wants_write() {
                    client(|| c.write_tls(w).unwrap());
                }
            },
            &mut |b| {
                s.read_tls(&mut &b[..]).unwrap();
                s.process_new_packets().unwrap();
            },
        );
        carry(
            &mut |w| {
                while s.wants_write() {
                    s.write_tls(w).unwrap();
                }
            },
            &mut |b| {
                client(|| {
                    c.read_tls(&mut &b[..]).unwrap();
                    c.process_new_packets().unwrap();
                })
            },
        );
    }
    report("handshake done (tickets read)");
    s.writer()
        .write_all(b"data: {\"seq\":1,\"at\":1700000000.123}\n\n")
        .unwrap();
    carry(
        &mut |w| {
            while s.wants_write() {
                s.write_tls(w).unwrap();
            }
        },
        &mut |b| {
            client(|| {
                c.read_tls(&mut &b[..]).unwrap();
                c.process_new_packets().unwrap();
            })
        },
    );
    let mut event = [0u8; 256];
    client(|| c.reader().read(&mut event).unwrap());
    report("one event read and drained");
    client(|| drop(c));
    report("connection dropped (left: the shared cache)");
    println!(
        "size_of::<ClientConnection>() = {} B (in the Box above)",
        std::mem::size_of::<ClientConnection>()
    );
}

/// Runs the client side over rustls's unbuffered API until it needs more records: the
/// records read go out of `incoming`, the records it sends into `out`, decrypted bytes into
/// `plain`. All three are the caller's, as the engine's worker buffers are (engine/src/tls.rs).
fn feed(
    c: &mut UnbufferedClientConnection,
    incoming: &mut Vec<u8>,
    out: &mut Vec<u8>,
    plain: &mut Vec<u8>,
    scratch: &mut [u8],
) {
    loop {
        let status = c.process_tls_records(incoming);
        let discard = status.discard;
        let go_on = match status.state.unwrap() {
            ConnectionState::ReadTraffic(mut records) => {
                while let Some(record) = records.next_record() {
                    plain.extend_from_slice(record.unwrap().payload);
                }
                true
            }
            ConnectionState::EncodeTlsData(mut records) => {
                let n = records.encode(scratch).unwrap();
                out.extend_from_slice(&scratch[..n]);
                true
            }
            ConnectionState::TransmitTlsData(sent) => {
                sent.done();
                true
            }
            _ => false,
        };
        incoming.drain(..discard);
        if !go_on {
            return;
        }
    }
}

/// As `run`, with the client on the unbuffered API, as the engine drives it: the buffers the
/// records pass through are made before counting starts (a worker's, not the connection's).
fn run_unbuffered(tls12: bool) {
    println!("-- TLS 1.{}, unbuffered API --", if tls12 { 2 } else { 3 });
    let (cc, sc) = configs(tls12);
    let name = ServerName::try_from("localhost").unwrap();
    let mut c = client(|| Box::new(UnbufferedClientConnection::new(cc.clone(), name).unwrap()));
    report("UnbufferedClientConnection::new");
    let mut s = ServerConnection::new(sc).unwrap();
    let (mut incoming, mut out, mut plain) = (
        Vec::with_capacity(1 << 16),
        Vec::with_capacity(1 << 16),
        Vec::with_capacity(1 << 16),
    );
    let mut scratch = vec![0u8; 1 << 16];
    // A few flights each way: the handshake and the tickets after it.
    for _ in 0..6 {
        client(|| feed(&mut c, &mut incoming, &mut out, &mut plain, &mut scratch));
        s.read_tls(&mut &out[..]).unwrap();
        out.clear();
        s.process_new_packets().unwrap();
        while s.wants_write() {
            s.write_tls(&mut incoming).unwrap();
        }
    }
    assert!(!c.is_handshaking());
    report("handshake done (tickets read)");
    s.writer()
        .write_all(b"data: {\"seq\":1,\"at\":1700000000.123}\n\n")
        .unwrap();
    while s.wants_write() {
        s.write_tls(&mut incoming).unwrap();
    }
    client(|| feed(&mut c, &mut incoming, &mut out, &mut plain, &mut scratch));
    assert_eq!(plain.len(), 37);
    report("one event read and drained");
    client(|| drop(c));
    report("connection dropped (left: the shared cache)");
    println!(
        "size_of::<UnbufferedClientConnection>() = {} B (in the Box above)",
        std::mem::size_of::<UnbufferedClientConnection>()
    );
}

fn main() {
    run(false);
    run(true);
    run_unbuffered(false);
    run_unbuffered(true);
}
