//! Run stage: one worker thread: a single-threaded event loop running this worker's share of slots (or
//! its share of open-loop arrivals), all through one generic loop.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::{JoinHandle, JoinSet};

use crate::behaviours::{self, Attempt, Behaviour, Runner};
use crate::client::Client;
use crate::emits::EmitLog;
use crate::ledger::STARVED_PAUSE;
use crate::pacer::{Pacer, Scheduled};
use crate::plain::Plain;
use crate::plan::{Clients, IoBackend, Share};
use crate::shared::{Shared, WorkerCtx};
use crate::spin;
use crate::stats::Histograms;
use crate::uring;

/// How often a worker of a run with a warm-up phase looks whether the run's end has moved.
const END_RECHECK: Duration = Duration::from_millis(20);

/// What one worker kept to itself during the run, merged with the others' at the end.
pub struct WorkerResults {
    pub histograms: Histograms,
    pub emits: EmitLog,
    /// The loop that drove the sockets: epoll or io_uring.
    pub io: IoBackend,
    /// When this worker's pacers started (after waiting for the run's start).
    pub started: Instant,
    /// Time its loop spent spinning (polls that found nothing).
    pub spun: Duration,
}

/// Runs worker `index` to completion and returns what it recorded.
pub fn run_worker(index: usize, shared: Arc<Shared>) -> std::io::Result<WorkerResults> {
    let ctx = Rc::new(WorkerCtx::new(shared, index));
    let spun = Rc::new(Cell::new(Duration::ZERO));
    let (io, started) = match ring_for(&ctx.shared, index)? {
        Some(ring) => {
            let plan = &ctx.shared.plan;
            let plain = Plain::new(plan, index);
            let slots = my_share(plan.plan.connections, index, plan.threads);
            let spinning = ctx.shared.spin.then(|| spun.clone());
            let driver = uring::Driver::new(ring, ctx.clone(), &plain, slots, spinning);
            let _stamping = stamping(plan.plan.stamps_arrivals())?;
            let started = ctx.wait_for_start();
            driver.run()?;
            (IoBackend::IoUring, started)
        }
        None => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let local = tokio::task::LocalSet::new();
            let _stamping = stamping(ctx.shared.plan.plan.stamps_arrivals())?;
            if ctx.shared.spin {
                let (ctx, spun) = (ctx.clone(), spun.clone());
                local.spawn_local(async move {
                    spin::spin(&ctx.ledger.steps, &spun, ctx.ledger.counters()).await
                });
            }
            let started = local.block_on(&runtime, drive(index, ctx.clone()));
            // Dropping the set drops every task still in flight (and closes its connections);
            // a connect or a TLS handshake among them counts as the ledger says
            // (`Ledger::stage_cut`).
            ctx.ledger.run_over();
            drop(local);
            (IoBackend::Epoll, started)
        }
    };
    // The cycles that had not settled (the coordinator took the others during the run).
    let emits = std::mem::take(&mut *ctx.emits());
    Ok(WorkerResults {
        histograms: ctx.ledger.take_histograms(),
        emits,
        io,
        started,
        spun: spun.get(),
    })
}

/// The kernel's receive stamping held on through the run, if the plan's connections ask for
/// stamps (`conn::hold_stamping`: each new connection then costs no switching).
fn stamping(stamped: bool) -> std::io::Result<Option<socket2::Socket>> {
    stamped.then(crate::conn::hold_stamping).transpose()
}

/// The io_uring ring this worker should use, if the plan asks for io_uring or leaves the
/// choice to us and the kernel offers it (a spinning wait under `auto` spins on epoll; on the
/// ring only when the plan asks for io_uring).
fn ring_for(shared: &Shared, index: usize) -> std::io::Result<Option<io_uring::IoUring>> {
    let plan = &shared.plan;
    let spins_on_epoll = shared.spin && plan.plan.io == IoBackend::Auto;
    if plan.plan.io == IoBackend::Epoll || !plan.plan.suits_io_uring() || spins_on_epoll {
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

/// Runs this worker's share of the plan; returns when its pacers started.
async fn drive(index: usize, ctx: Rc<WorkerCtx>) -> Instant {
    behaviours::build(&ctx.shared.plan, index, Drive { index, ctx: &ctx }).await
}

/// The worker's loop as the runner of whichever behaviour the plan builds.
struct Drive<'a> {
    index: usize,
    ctx: &'a Rc<WorkerCtx>,
}

impl<'a> Runner for Drive<'a> {
    type Out = Pin<Box<dyn Future<Output = Instant> + 'a>>;

    fn run<B: Behaviour + 'static>(self, behaviour: B) -> Self::Out {
        Box::pin(drive_with(self.index, self.ctx, behaviour))
    }
}

/// Waits for the run's start with everything built, then runs the slots until they are done,
/// the run's end, or an early stop's grace is over; returns when the pacers started.
async fn drive_with<B: Behaviour + 'static>(
    index: usize,
    ctx: &Rc<WorkerCtx>,
    behaviour: B,
) -> Instant {
    // No task exists on this loop yet: blocking its thread until the start delays nothing.
    let started = ctx.wait_for_start();
    // Past the end no budget is granted, so a slot stops after the exchange in hand.
    let finish = behaviour
        .finishes_at_end()
        .then(|| behaviour.timeout())
        .flatten();
    let tasks = spawn_slots(index, ctx, Rc::new(behaviour));
    until_over(&ctx.shared, tasks, finish).await;
    started
}

/// Until every task is done, the run's end (plus `finish`, for exchanges in flight then),
/// or an early stop's grace is over.
async fn until_over(shared: &Shared, tasks: Vec<JoinHandle<()>>, finish: Option<Duration>) {
    let all = async {
        for task in tasks {
            let _ = task.await;
        }
    };
    let end = async {
        // The end may move earlier once (a warm-up ending): look again when the sleep ends.
        while let Some(end) = shared.end() {
            let over = end + finish.unwrap_or_default();
            if Instant::now() >= over {
                return;
            }
            let wake = match shared.plan.plan.warmup_max_s {
                Some(_) => over.min(Instant::now() + END_RECHECK),
                None => over,
            };
            tokio::time::sleep_until(wake.into()).await;
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        _ = all => {}
        _ = end => {}
        _ = shared.abandoned() => {}
    }
}

/// This worker's share of the plan's clients, each paced as the plan says.
fn spawn_slots<B: Behaviour + 'static>(
    index: usize,
    ctx: &Rc<WorkerCtx>,
    behaviour: Rc<B>,
) -> Vec<JoinHandle<()>> {
    let shared = &ctx.shared;
    let plan = &shared.plan.plan;
    let share = Share {
        index: index as u64,
        threads: shared.plan.threads as u64,
        start: shared.start,
        // Fixed here: only a closed loop has a warm-up phase, which moves the end.
        end: shared.end(),
    };
    match plan.pacer.pace().clients(&plan.view(), &share) {
        Clients::Slots(pacers) => pacers
            .into_iter()
            .map(|pacer| tokio::task::spawn_local(slot_loop(ctx.clone(), behaviour.clone(), pacer)))
            .collect(),
        Clients::Arrivals { pacer, calls } => {
            vec![tokio::task::spawn_local(dispatch(
                ctx.clone(),
                behaviour,
                pacer,
                calls,
            ))]
        }
    }
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
    // A sender whose last exchange must be finished must also have it read (TLS syslog);
    // bounded, since a server that never closes would hold a run with no end time forever.
    if behaviour.finishes_at_end() {
        let wait = behaviour.timeout().unwrap_or(Duration::from_secs(5));
        let _ = tokio::time::timeout(wait, client.goodbye()).await;
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
            .unwrap_or_else(|_| Err(client.timed_out())),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacer::BackToBack;
    use crate::plan::Plan;
    use crate::shared::Shared;

    /// What a held client keeps inline in its task, in bytes: the slot's future (the largest
    /// state it awaits in), and what makes it up (the client, the behaviour's state, one
    /// exchange in flight and the client's own waits within it).
    #[derive(Debug)]
    #[allow(dead_code)] // read through Debug, to show where the bytes go
    struct Sizes {
        slot: usize,
        exchange: usize,
        client: usize,
        state: usize,
        open_and_send: usize,
        read_answer: usize,
        fill: usize,
        send: usize,
    }

    struct Measure(Rc<WorkerCtx>);

    impl Runner for Measure {
        type Out = Sizes;

        fn run<B: Behaviour + 'static>(self, behaviour: B) -> Sizes {
            let behaviour = Rc::new(behaviour);
            let mut c = Client::new(self.0.clone());
            let mut state = B::State::default();
            let attempt = Attempt {
                intended: None,
                units: 1,
            };
            let exchange = size_of_val(&behaviour.exchange(&mut c, &mut state, attempt));
            let open_and_send = size_of_val(&c.open_and_send(&[]));
            let read_answer = size_of_val(&c.read_answer(false, &mut crate::inbox::discard));
            let fill = size_of_val(&c.fill());
            let send = size_of_val(&c.send(&[]));
            let pacer = Box::new(BackToBack::new(Instant::now()));
            Sizes {
                slot: size_of_val(&slot_loop(self.0, behaviour, pacer)),
                exchange,
                client: size_of::<Client>(),
                state: size_of::<B::State>(),
                open_and_send,
                read_answer,
                fill,
                send,
            }
        }
    }

    fn sizes(path: &str, behaviour: serde_json::Value) -> Sizes {
        let plan = Plan::from_value(serde_json::json!({
            "target": format!("http://127.0.0.1:1{path}"), "duration_s": 1.0,
            "behaviour": behaviour}))
        .unwrap()
        .validate()
        .unwrap();
        let shared = Arc::new(Shared::new(plan, Instant::now()));
        let ctx = Rc::new(WorkerCtx::new(shared.clone(), 0));
        behaviours::build(&shared.plan, 0, Measure(ctx))
    }

    /// A held push connection may cost the engine 2 KiB (issue 21). Its task is most of
    /// it: tokio allocates the future with ~104 bytes of its own, rounded up to 128 bytes,
    /// beside its I/O registration (256 bytes) and a little heap. At most 1,280 bytes inline
    /// keeps the task at 1,408 bytes or less (bench/README.md, push-memory.sh, for where
    /// the rest goes and for the figures).
    #[test]
    fn a_held_push_clients_task_keeps_at_most_1280_bytes_inline() {
        for (path, behaviour) in [
            (
                "/push",
                serde_json::json!({"kind": "comet", "events": ["e1"]}),
            ),
            ("/sse", serde_json::json!({"kind": "sse", "events": ["e1"]})),
            (
                "/ws",
                serde_json::json!({"kind": "websocket", "events": ["e1"]}),
            ),
        ] {
            let s = sizes(path, behaviour);
            eprintln!("{path}: {s:?}");
            assert!(s.slot <= 1280, "{path}: {s:?}");
        }
    }
}
