package serverlab.core;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The seed 004 Request Manager and Event Manager: registers push requests with events, runs
 * the emitters and hands each delivery to the request's {@link PushSink}. How a request waits
 * and how it is timed out belongs to each request-handling model.
 */
public final class RequestManager {
    private final ConcurrentHashMap<String, EventChannel> channels = new ConcurrentHashMap<>();
    private final AtomicInteger openPush = new AtomicInteger();
    private final Stats stats;
    private final ScheduledExecutorService emitters;

    public RequestManager(Stats stats) {
        this.stats = stats;
        AtomicLong threadNumber = new AtomicLong();
        ScheduledThreadPoolExecutor pool = new ScheduledThreadPoolExecutor(
                Math.max(2, Runtime.getRuntime().availableProcessors()), task -> {
                    Thread thread = new Thread(task, "emitter-" + threadNumber.incrementAndGet());
                    thread.setDaemon(true);
                    return thread;
                });
        pool.setRemoveOnCancelPolicy(true);
        this.emitters = pool;
    }

    public int openPush() {
        return openPush.get();
    }

    /** Registers a push request with each of its events; it waits until answered or dropped. */
    public PushRequest register(PushSpec spec, PushSink sink) {
        int start = openPush.incrementAndGet();
        PushRequest request = new PushRequest(spec, sink, System.currentTimeMillis(), start);
        for (String name : spec.events()) {
            channels.compute(name, (key, channel) -> {
                EventChannel subscribed = channel != null ? channel : new EventChannel(key);
                subscribed.subscribe(request);
                return subscribed;
            });
        }
        return request;
    }

    /**
     * The long poll's time is up: the timeout answer, or null when a delivery won the race (the
     * delivery then is, or is about to be, in the request's sink).
     */
    public byte[] timeout(PushRequest request) {
        if (!request.finish()) {
            return null;
        }
        byte[] answer = Deliveries.timeout(request, System.currentTimeMillis(), openPush.get());
        unregister(request);
        stats.timeoutAnswered();
        return answer;
    }

    /** The comet stream's duration has passed: its last line, or null if it already ended. */
    public byte[] endStream(PushRequest request) {
        return timeout(request);
    }

    /** The client went away or the request failed: drop it from every list. */
    public void abandon(PushRequest request) {
        request.finish();
        unregister(request);
    }

    private void unregister(PushRequest request) {
        if (!request.unregisterOnce()) {
            return;
        }
        for (String name : request.spec().events()) {
            channels.computeIfPresent(name, (key, channel) -> {
                channel.unsubscribe(request);
                return channel.disposable() ? null : channel;
            });
        }
        openPush.decrementAndGet();
    }

    /** {@code POST /event/set}: starts or replaces an emitter; returns whether one was replaced. */
    public boolean set(String name, long intervalMs) {
        // Marked inside compute so a concurrent unsubscribe cannot dispose of it before it is set.
        EventChannel channel = channels.compute(name, (key, existing) -> {
            EventChannel named = existing != null ? existing : new EventChannel(key);
            named.markSet();
            return named;
        });
        synchronized (channel) {
            // Scheduling and installing under the channel's lock keeps two racing sets from
            // leaving two live schedules.
            var schedule = emitters.scheduleAtFixedRate(() -> emitCycle(channel), intervalMs, intervalMs,
                    TimeUnit.MILLISECONDS);
            return channel.replaceSchedule(intervalMs, schedule);
        }
    }

    /** {@code POST /event/clear} of one name; 404 when it has no active emitter. */
    public List<String> clear(String name) {
        EventChannel channel = channels.get(name);
        if (channel == null || !channel.stop()) {
            throw ApiException.notFound("unknown event");
        }
        return List.of(name);
    }

    /** {@code POST /event/clear} of every emitter; the names stopped, sorted. */
    public List<String> clearAll() {
        List<String> cleared = new ArrayList<>();
        for (EventChannel channel : channels.values()) {
            if (channel.stop()) {
                cleared.add(channel.name);
            }
        }
        cleared.sort(null);
        return cleared;
    }

    /** The {@code events} object of {@code /stats}: every name ever set, sorted. */
    public Map<String, Object> eventStats() {
        Map<String, Object> events = new TreeMap<>();
        for (EventChannel channel : channels.values()) {
            if (channel.everSet()) {
                events.put(channel.name, channel.stats());
            }
        }
        return events;
    }

    private void emitCycle(EventChannel channel) {
        channel.cycleLock.lock();
        try {
            long created = System.currentTimeMillis();
            long[] seq = new long[1];
            List<PushRequest> snapshot = channel.beginCycle(seq);
            int total = snapshot.size();
            long delivered = 0;
            for (int i = 0; i < total; i++) {
                if (deliver(snapshot.get(i), channel.name, seq[0], created, total, i + 1)) {
                    delivered++;
                }
            }
            channel.endCycle(delivered, System.currentTimeMillis() - created);
        } catch (RuntimeException | Error e) {
            // An exception would silently cancel the schedule; the emitter must keep running.
            System.err.println("emitter " + channel.name + ": " + e);
        } finally {
            channel.cycleLock.unlock();
        }
    }

    private boolean deliver(PushRequest request, String name, long seq, long created, int total, int place) {
        if (request.longPoll() ? !request.finish() : request.isFinished()) {
            return false; // answered by another event or timed out meanwhile
        }
        long sent = System.currentTimeMillis();
        byte[] body = Deliveries.event(request, name, seq, created, sent, total, place, openPush.get());
        if (request.longPoll()) {
            // Answered: out of every list before the client can read the answer, so a client
            // that asks /stats next never sees its own poll still open.
            unregister(request);
        }
        boolean accepted;
        try {
            accepted = request.sink().deliver(body);
        } catch (RuntimeException e) {
            accepted = false;
        }
        if (!accepted) {
            abandon(request);
        }
        if (accepted) {
            stats.pushDelivered();
        }
        return accepted;
    }
}
