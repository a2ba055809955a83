//! One worker thread: a single-threaded event loop running this worker's share of slots (or
//! its share of open-loop arrivals), all through one generic loop.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::{JoinHandle, JoinSet};

use crate::behaviour::{Attempt, Behaviour, Comet, LongPoll, Plain, SlowUpload, Syslog};
use crate::client::Client;
use crate::emits::EmitLog;
use crate::ledger::STARVED_PAUSE;
use crate::pacer::{user_start, BackToBack, Pacer, RateCurve, Scheduled};
use crate::plan::{BehaviourSpec, IoBackend, PacerSpec, SyslogTransport};
use crate::shared::{Shared, WorkerCtx};
use crate::stats::{ErrorKind, Histograms};
use crate::uring;

/// Messages per write when syslog is not paced: batching is what a real forwarder does.
const SYSLOG_BATCH: u64 = 64;

/// What one worker kept to itself during the run, merged with the others' at the end.
pub struct WorkerResults {
    pub histograms: Histograms,
    pub emits: EmitLog,
    /// The loop that drove the sockets: epoll or io_uring.
    pub io: IoBackend,
}

/// Runs worker `index` to completion and returns what it recorded.
pub fn run_worker(index: usize, shared: Arc<Shared>) -> std::io::Result<WorkerResults> {
    let ctx = Rc::new(WorkerCtx::new(shared, index));
    let io = match ring_for(&ctx.shared, index)? {
        Some(ring) => {
            let plan = &ctx.shared.plan;
            let plain = Plain::new(plan, index);
            let slots = my_share(plan.plan.connections, index, plan.threads);
            uring::Driver::new(ring, ctx.clone(), &plain, slots).run()?;
            IoBackend::IoUring
        }
        None => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, drive(index, ctx.clone()));
            // Dropping the set drops every task still in flight (and closes its connections).
            drop(local);
            IoBackend::Epoll
        }
    };
    Ok(WorkerResults {
        histograms: ctx.ledger.take_histograms(),
        emits: ctx.emits.take(),
        io,
    })
}

/// The io_uring ring this worker should use, if the plan asks for io_uring or leaves the
/// choice to us and the kernel offers it.
fn ring_for(shared: &Shared, index: usize) -> std::io::Result<Option<io_uring::IoUring>> {
    let plan = &shared.plan;
    if plan.plan.io == IoBackend::Epoll || !plan.plan.suits_io_uring() {
        return Ok(None);
    }
    let slots = my_share(plan.plan.connections, index, plan.threads);
    match uring::new_ring(slots) {
        Ok(ring) => Ok(Some(ring)),
        Err(_) if plan.plan.io == IoBackend::Auto => Ok(None),
        Err(e) => Err(std::io::Error::other(format!(
            "io_uring is not available ({e}); use --io epoll"
        ))),
    }
}

/// How many of `total` slots worker `index` of `threads` runs.
fn my_share(total: u64, index: usize, threads: usize) -> usize {
    (index as u64..total).step_by(threads).count()
}

async fn drive(index: usize, ctx: Rc<WorkerCtx>) {
    let plan = &ctx.shared.plan;
    match &plan.plan.behaviour {
        BehaviourSpec::Keepalive {}
        | BehaviourSpec::NewConnection {}
        | BehaviourSpec::SlowReader { .. } => {
            drive_with(index, &ctx, Plain::new(plan, index)).await
        }
        BehaviourSpec::Longpoll {
            events,
            duration_ms,
        } => drive_with(index, &ctx, LongPoll::new(plan, events, *duration_ms)).await,
        BehaviourSpec::Comet {
            events,
            duration_ms,
        } => drive_with(index, &ctx, Comet::new(plan, events, *duration_ms)).await,
        BehaviourSpec::SlowUpload { bytes, bytes_per_s } => {
            drive_with(index, &ctx, SlowUpload::new(plan, *bytes, *bytes_per_s)).await
        }
        BehaviourSpec::Syslog {
            transport,
            framing,
            message_bytes,
        } => {
            let batch = if plan.plan.pacer.is_open() {
                1
            } else {
                SYSLOG_BATCH
            };
            let udp = *transport == SyslogTransport::Udp;
            let syslog = Syslog::new(plan, *framing, *message_bytes, udp, batch);
            drive_with(index, &ctx, syslog).await
        }
    }
}

async fn drive_with<B: Behaviour + 'static>(index: usize, ctx: &Rc<WorkerCtx>, behaviour: B) {
    let behaviour = Rc::new(behaviour);
    let shared = &ctx.shared;
    let plan = &shared.plan;
    let threads = plan.threads as u64;
    let mine = |total: u64| (index as u64..total).step_by(threads as usize);
    let start = shared.start;
    let mut tasks: Vec<JoinHandle<()>> = Vec::new();
    let mut spawn_slot = |pacer: Box<dyn Pacer>| {
        tasks.push(tokio::task::spawn_local(slot_loop(
            ctx.clone(),
            behaviour.clone(),
            pacer,
        )));
    };
    match &plan.plan.pacer {
        PacerSpec::Closed {} => {
            for _ in mine(plan.plan.connections) {
                spawn_slot(Box::new(BackToBack::new(start)));
            }
        }
        PacerSpec::Sequential {} => {
            for _ in mine(1) {
                spawn_slot(Box::new(BackToBack::new(start)));
            }
        }
        PacerSpec::Users {
            users, ramp_up_s, ..
        } => {
            let ramp = Duration::from_secs_f64(*ramp_up_s);
            for user in mine(*users) {
                spawn_slot(Box::new(BackToBack::new(user_start(
                    start, user, *users, ramp,
                ))));
            }
        }
        PacerSpec::Open { .. } if plan.plan.is_pooled() => {
            let curve = rate_curve(&plan.plan.pacer);
            let pool = plan.plan.connections;
            for slot in mine(pool) {
                spawn_slot(Box::new(Scheduled::new(
                    start, curve, slot, pool, shared.end,
                )));
            }
        }
        PacerSpec::Open { .. } => {
            let curve = rate_curve(&plan.plan.pacer);
            let pacer = Scheduled::new(start, curve, index as u64, threads, shared.end);
            let calls = plan.plan.calls_per_arrival();
            tasks.push(tokio::task::spawn_local(dispatch(
                ctx.clone(),
                behaviour.clone(),
                pacer,
                calls,
            )));
        }
    }
    let all = async {
        for task in tasks {
            let _ = task.await;
        }
    };
    let end = async {
        match shared.end {
            Some(end) => tokio::time::sleep_until(end.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = all => {}
        _ = end => {}
        _ = shared.abandoned() => {}
    }
}

/// The schedule of an open-loop pacer (only open pacers reach here).
fn rate_curve(pacer: &PacerSpec) -> RateCurve {
    RateCurve::of(pacer).unwrap_or(RateCurve::fixed(1.0))
}

/// One slot: a client looping its behaviour whenever its pacer allows.
async fn slot_loop<B: Behaviour>(ctx: Rc<WorkerCtx>, behaviour: Rc<B>, mut pacer: Box<dyn Pacer>) {
    let mut client = Client::new(ctx.clone());
    let mut state = B::State::default();
    while let Some(at) = pacer.next() {
        if at > Instant::now() {
            tokio::time::sleep_until(at.into()).await;
        }
        let granted = ctx.shared.take_budget(behaviour.units());
        if granted == 0 {
            break;
        }
        let intended = pacer.open_loop().then_some(at);
        attempt(&*behaviour, &mut client, &mut state, intended, granted).await;
    }
}

/// Open loop with a new connection per arrival: arrivals never wait for earlier ones.
async fn dispatch<B: Behaviour + 'static>(
    ctx: Rc<WorkerCtx>,
    behaviour: Rc<B>,
    mut pacer: Scheduled,
    calls: u64,
) {
    let mut clients = JoinSet::new();
    while let Some(at) = pacer.next() {
        if at > Instant::now() {
            tokio::time::sleep_until(at.into()).await;
        }
        // An arrival reserves all its calls at once, so a request-count run makes whole
        // connections (httperf: --num-conns × --num-calls), not more arrivals cut short.
        let granted = ctx.shared.take_budget(calls);
        if granted == 0 {
            break;
        }
        clients.spawn_local(arrival(ctx.clone(), behaviour.clone(), at, granted));
        while clients.try_join_next().is_some() {}
    }
    while clients.join_next().await.is_some() {}
}

async fn arrival<B: Behaviour>(ctx: Rc<WorkerCtx>, behaviour: Rc<B>, at: Instant, calls: u64) {
    let mut client = Client::new(ctx.clone());
    let mut state = B::State::default();
    attempt(&*behaviour, &mut client, &mut state, Some(at), 1).await;
    for _ in 1..calls {
        if ctx
            .shared
            .stopping
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            break;
        }
        attempt(&*behaviour, &mut client, &mut state, None, 1).await;
    }
}

/// One exchange with its timeout, entered in the worker's ledger.
async fn attempt<B: Behaviour>(
    behaviour: &B,
    client: &mut Client,
    state: &mut B::State,
    intended: Option<Instant>,
    units: u64,
) {
    client.ledger().begin(units);
    let exchange = behaviour.exchange(client, state, Attempt { intended, units });
    let result = match behaviour.timeout() {
        Some(limit) => tokio::time::timeout(limit, exchange)
            .await
            .unwrap_or(Err(ErrorKind::Timeout)),
        None => exchange.await,
    };
    client.ledger().end(units, result);
    if let Err(kind) = result {
        client.close();
        if kind.invalidates_run() {
            tokio::time::sleep(STARVED_PAUSE).await;
        }
    }
}
