package serverlab.core;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One event name: its subscribers in subscription order, its emitter schedule and its counters.
 * The subscriber set is guarded by {@code this}; it is held only to add, remove or copy, never
 * while delivering (seed 004 §3.1.1: snapshot under the lock, deliver outside it).
 */
final class EventChannel {
    final String name;
    /** Serializes emit cycles, so a replaced emitter's last cycle never overlaps the new one's. */
    final ReentrantLock cycleLock = new ReentrantLock();
    private final LinkedHashSet<PushRequest> subscribers = new LinkedHashSet<>();
    private boolean everSet;
    private boolean active;
    private long intervalMs;
    private ScheduledFuture<?> schedule;
    private long lastSeq;
    private long emits;
    private long deliveries;
    private long lastEmitMs;
    private long maxEmitMs;
    private long totalEmitMs;

    EventChannel(String name) {
        this.name = name;
    }

    synchronized void subscribe(PushRequest request) {
        subscribers.add(request);
    }

    synchronized void unsubscribe(PushRequest request) {
        subscribers.remove(request);
    }

    /** Whether the map may forget it: never set and nobody waiting, so nothing would be lost. */
    synchronized boolean disposable() {
        return !everSet && subscribers.isEmpty();
    }

    /** Starts a cycle: the next sequence number and the subscribers to deliver to, in order. */
    synchronized List<PushRequest> beginCycle(long[] seqOut) {
        seqOut[0] = ++lastSeq;
        List<PushRequest> snapshot = new ArrayList<>(subscribers);
        subscribers.removeIf(PushRequest::longPoll); // a long poll is answered by this cycle
        return snapshot;
    }

    synchronized void endCycle(long delivered, long durationMs) {
        emits++;
        deliveries += delivered;
        lastEmitMs = durationMs;
        maxEmitMs = Math.max(maxEmitMs, durationMs);
        totalEmitMs += durationMs;
    }

    synchronized void markSet() {
        everSet = true;
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

    synchronized boolean isActive() {
        return active;
    }

    synchronized boolean everSet() {
        return everSet;
    }

    synchronized Map<String, Object> stats() {
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("interval_ms", intervalMs);
        doc.put("active", active);
        doc.put("emits", emits);
        doc.put("last_seq", lastSeq);
        doc.put("deliveries", deliveries);
        doc.put("last_emit_duration_ms", lastEmitMs);
        doc.put("max_emit_duration_ms", maxEmitMs);
        doc.put("total_emit_duration_ms", totalEmitMs);
        return doc;
    }
}
