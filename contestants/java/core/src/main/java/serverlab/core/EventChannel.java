package serverlab.core;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One event name: its subscribers in subscription order, its emitter schedule, the replay
 * buffer of its newest cycles and its counters. The state is guarded by {@code this}, held
 * only to add, remove or copy, never while delivering (seed 004 §3.1.1: snapshot under the
 * lock, deliver outside it).
 */
final class EventChannel {
    /** Emit cycles kept per event for SSE replay (spec §10): exactly the newest 64. */
    static final int REPLAY_BUFFER = 64;

    final String name;
    /** Serializes emit cycles, so a replaced emitter's last cycle never overlaps the new one's. */
    final ReentrantLock cycleLock = new ReentrantLock();
    private final LinkedHashSet<Subscriber> subscribers = new LinkedHashSet<>();
    private final ArrayDeque<Cycle> history = new ArrayDeque<>(REPLAY_BUFFER);
    /** Set or published to: listed in {@code /stats} and never forgotten. */
    private boolean listed;
    private boolean active;
    private long intervalMs;
    private ScheduledFuture<?> schedule;
    private long lastSeq;
    private long emits;
    private long deliveries;
    /**
     * The emit durations (spec §5), raised by the threads that write the deliveries right after
     * each takes its {@code sent} and before it writes: atomics, so that no such thread ever
     * waits for a lock between its stamp and its write.
     */
    private final AtomicReference<LastEmit> lastEmit = new AtomicReference<>(new LastEmit(0, 0));
    private final AtomicLong maxEmitMs = new AtomicLong();
    private final AtomicLong totalEmitMs = new AtomicLong();

    /** The newest cycle begun and its emit duration so far. */
    private record LastEmit(long seq, long durationMs) {
    }

    /** One emit cycle: its seq, when it started, and a publish's data (JSON), else null. */
    record Cycle(long seq, long created, String dataJson) {
    }

    /** What a subscriber finds as it subscribes: the newest seq, and the buffered cycles after its position. */
    record Resume(long lastSeq, List<Cycle> buffered) {
    }

    EventChannel(String name) {
        this.name = name;
    }

    /**
     * Subscribes and, in the same step, takes the newest seq and what the buffer holds after
     * {@code after} (nothing when null), so every later seq reaches the subscriber live and
     * every earlier one is in the answer.
     */
    synchronized Resume subscribeAfter(Subscriber subscriber, Long after) {
        subscribers.add(subscriber);
        List<Cycle> buffered = new ArrayList<>();
        for (Cycle cycle : after == null ? List.<Cycle>of() : history) {
            if (cycle.seq() > after) {
                buffered.add(cycle);
            }
        }
        return new Resume(lastSeq, buffered);
    }

    synchronized void unsubscribe(Subscriber subscriber) {
        subscribers.remove(subscriber);
    }

    /** Whether the map may forget it: never set nor published to and nobody waiting. */
    synchronized boolean disposable() {
        return !listed && subscribers.isEmpty();
    }

    /** Starts a cycle: numbers and buffers it, and copies the subscribers to deliver to, in order. */
    synchronized List<Subscriber> beginCycle(String dataJson, Cycle[] cycleOut) {
        Cycle cycle = new Cycle(++lastSeq, System.currentTimeMillis(), dataJson);
        if (history.size() == REPLAY_BUFFER) {
            history.removeFirst();
        }
        history.addLast(cycle);
        cycleOut[0] = cycle;
        lastEmit.set(new LastEmit(cycle.seq(), 0)); // until a delivery is written (to nobody: 0)
        List<Subscriber> snapshot = new ArrayList<>(subscribers);
        subscribers.removeIf(Subscriber::longPoll); // a long poll is answered by this cycle
        return snapshot;
    }

    /** The cycle has handed every delivery over: counted, though some may not be written yet. */
    synchronized void endCycle(long delivered) {
        emits++;
        deliveries += delivered;
    }

    /**
     * Cycle {@code seq}'s emit duration (spec §5: from its start to its last delivery) rose by
     * {@code by} to {@code durationMs}, as one of its deliveries was written. The writing
     * threads take those stamps, so a cycle's duration may still grow after the next began.
     */
    void raiseEmitDuration(long seq, long durationMs, long by) {
        totalEmitMs.addAndGet(by);
        maxEmitMs.accumulateAndGet(durationMs, Math::max);
        lastEmit.updateAndGet(last -> last.seq() == seq && last.durationMs() < durationMs
                ? new LastEmit(seq, durationMs) : last);
    }

    synchronized void markListed() {
        listed = true;
    }

    /** Installs a new schedule; returns whether an active one was replaced. */
    synchronized boolean replaceSchedule(long newIntervalMs, ScheduledFuture<?> newSchedule) {
        boolean replaced = stop();
        active = true;
        intervalMs = newIntervalMs;
        schedule = newSchedule;
        return replaced;
    }

    /** Stops the emitter; a cycle already running finishes. Returns whether it was active. */
    synchronized boolean stop() {
        boolean wasActive = active;
        if (schedule != null) {
            schedule.cancel(false);
            schedule = null;
        }
        active = false;
        return wasActive;
    }

    synchronized boolean listed() {
        return listed;
    }

    synchronized Map<String, Object> stats() {
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("interval_ms", intervalMs);
        doc.put("active", active);
        doc.put("emits", emits);
        doc.put("last_seq", lastSeq);
        doc.put("deliveries", deliveries);
        doc.put("last_emit_duration_ms", lastEmit.get().durationMs());
        doc.put("max_emit_duration_ms", maxEmitMs.get());
        doc.put("total_emit_duration_ms", totalEmitMs.get());
        return doc;
    }
}
