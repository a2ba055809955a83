package serverlab.core;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;

/**
 * The seed 004 Request Manager and Event Manager: registers subscribers of every transport
 * with events, runs the emitters and publish cycles and hands each delivery, not yet made, to
 * the subscriber's {@link PushSink}: the thread that writes it makes it (see {@link Delivery}). How a subscriber waits and how it is timed out belongs to
 * each request-handling model.
 */
public final class RequestManager {
    private final ConcurrentHashMap<String, EventChannel> channels = new ConcurrentHashMap<>();
    /** Open subscribers of every transport: {@code connections.start} and {@code finish} (§6). */
    private final AtomicInteger openSubscribers = new AtomicInteger();
    private final AtomicIntegerArray openByTransport = new AtomicIntegerArray(Transport.values().length);
    private final Stats stats;
    private final ScheduledExecutorService emitters;

    /** A publish cycle's answer (§11): its seq and the size of its snapshot. */
    public record Published(long seq, int total) {
    }

    public RequestManager(Stats stats) {
        this.stats = stats;
        this.emitters = DaemonScheduler.create("emitter");
    }

    /** Open subscribers of one transport. */
    public int open(Transport transport) {
        return openByTransport.get(transport.ordinal());
    }

    /** {@code requests.open_push}: long polls and comet streams open now. */
    public int openPush() {
        return open(Transport.LONGPOLL) + open(Transport.COMET);
    }

    /** Registers a subscriber with each of its events; it waits until answered or dropped. */
    public Subscriber register(PushSpec spec, PushSink sink) {
        Subscriber subscriber = newSubscriber(spec, sink);
        for (String name : spec.events()) {
            subscribe(name, subscriber, null);
        }
        return subscriber;
    }

    /**
     * Registers an SSE stream (§10). For each event that {@code lastEventId} names, the stream
     * is subscribed and what it missed taken from the replay buffer in one step; the stream's
     * {@link SseStream#opening()} then holds its gap and replayed messages and the opening
     * message. The transport writes them before any live delivery.
     */
    public SseStream registerSse(PushSpec spec, Map<String, Long> lastEventId, PushSink sink) {
        Subscriber subscriber = newSubscriber(spec, sink);
        SseStream stream = new SseStream(subscriber);
        List<EventChannel.Resume> resumes = new ArrayList<>();
        for (String name : spec.events()) {
            Long named = lastEventId.get(name);
            EventChannel.Resume resume = subscribe(name, subscriber, named);
            stream.position(name, named == null ? resume.lastSeq() : named);
            resumes.add(resume);
        }
        // Every position is known before the first message, whose id names them all.
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (int i = 0; i < resumes.size(); i++) {
            String name = spec.events().get(i);
            if (lastEventId.containsKey(name)) {
                resume(stream, name, lastEventId.get(name), resumes.get(i), out);
            }
        }
        out.writeBytes(stream.openingMessage());
        stream.setOpening(out.toByteArray());
        stats.sseStarted();
        return stream;
    }

    /** The gap message if the buffer no longer reaches back to {@code after}, then the replays. */
    private void resume(SseStream stream, String name, long after, EventChannel.Resume resume,
            ByteArrayOutputStream out) {
        if (after == resume.lastSeq()) {
            return;
        }
        List<EventChannel.Cycle> buffered = resume.buffered();
        long next = buffered.isEmpty() ? resume.lastSeq() + 1 : buffered.get(0).seq();
        if (next > after + 1 || after > resume.lastSeq()) {
            out.writeBytes(stream.gap(name, after, next));
            stats.sseGap();
        }
        for (EventChannel.Cycle cycle : buffered) {
            byte[] json = Deliveries.event(stream.subscriber(), name, cycle, System.currentTimeMillis(), 1, 1,
                    openSubscribers.get(), true);
            out.writeBytes(stream.event(name, cycle.seq(), json));
            stats.sseReplayed();
        }
    }

    private Subscriber newSubscriber(PushSpec spec, PushSink sink) {
        openByTransport.incrementAndGet(spec.transport().ordinal());
        int start = openSubscribers.incrementAndGet();
        return new Subscriber(spec, sink, System.currentTimeMillis(), start);
    }

    /**
     * Subscribes to an event's channel, created if needed, and takes what it holds after
     * {@code after} (see {@link EventChannel#subscribeAfter}). Inside compute, so a concurrent
     * unsubscribe cannot dispose of the channel between finding it and subscribing.
     */
    private EventChannel.Resume subscribe(String name, Subscriber subscriber, Long after) {
        EventChannel.Resume[] resume = new EventChannel.Resume[1];
        channels.compute(name, (key, existing) -> {
            EventChannel channel = existing != null ? existing : new EventChannel(key);
            resume[0] = channel.subscribeAfter(subscriber, after);
            return channel;
        });
        return resume[0];
    }

    /** An event's channel, created if needed and marked set or published to, so never disposed of. */
    private EventChannel listedChannel(String name) {
        // Marked inside compute so a concurrent unsubscribe cannot dispose of it meanwhile.
        return channels.compute(name, (key, existing) -> {
            EventChannel channel = existing != null ? existing : new EventChannel(key);
            channel.markListed();
            return channel;
        });
    }

    /**
     * The long poll's or stream's time is up: the timeout answer, or null when a delivery won
     * the race or the stream already ended (the delivery then is, or is about to be, in the
     * subscriber's sink).
     */
    public byte[] timeout(Subscriber subscriber) {
        if (!subscriber.finish()) {
            return null;
        }
        byte[] answer = Deliveries.timeout(subscriber, System.currentTimeMillis(), openSubscribers.get());
        unregister(subscriber);
        stats.timedOut(subscriber.transport());
        return answer;
    }

    /** A stream's duration has passed: its last message, or null if it already ended. */
    public byte[] endStream(Subscriber subscriber) {
        return timeout(subscriber);
    }

    /** The client went away or the request failed: drop it from every list. */
    public void abandon(Subscriber subscriber) {
        subscriber.finish();
        unregister(subscriber);
    }

    private void unregister(Subscriber subscriber) {
        if (!subscriber.unregisterOnce()) {
            return;
        }
        for (String name : subscriber.spec().events()) {
            channels.computeIfPresent(name, (key, channel) -> {
                channel.unsubscribe(subscriber);
                return channel.disposable() ? null : channel;
            });
        }
        openByTransport.decrementAndGet(subscriber.transport().ordinal());
        openSubscribers.decrementAndGet();
    }

    /** {@code POST /event/set}: starts or replaces an emitter; returns whether one was replaced. */
    public boolean set(String name, long intervalMs) {
        EventChannel channel = listedChannel(name);
        synchronized (channel) {
            // Scheduling and installing under the channel's lock keeps two racing sets from
            // leaving two live schedules.
            var schedule = emitters.scheduleAtFixedRate(() -> timedCycle(channel), intervalMs, intervalMs,
                    TimeUnit.MILLISECONDS);
            return channel.replaceSchedule(intervalMs, schedule);
        }
    }

    /**
     * A WebSocket publish (§11): an emit cycle of the event now, in the caller's thread, with
     * the publish's data (JSON text); it waits for a cycle of the event already running.
     */
    public Published publish(String name, String dataJson) {
        return emitCycle(listedChannel(name), dataJson);
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

    /** The {@code events} object of {@code /stats}: every name ever set or published to, sorted. */
    public Map<String, Object> eventStats() {
        Map<String, Object> events = new TreeMap<>();
        for (EventChannel channel : channels.values()) {
            if (channel.listed()) {
                events.put(channel.name, channel.stats());
            }
        }
        return events;
    }

    private void timedCycle(EventChannel channel) {
        try {
            emitCycle(channel, null);
        } catch (RuntimeException | Error e) {
            // An exception would silently cancel the schedule; the emitter must keep running.
            System.err.println("emitter " + channel.name + ": " + e);
        }
    }

    private Published emitCycle(EventChannel channel, String dataJson) {
        channel.cycleLock.lock();
        try {
            EventChannel.Cycle[] cycle = new EventChannel.Cycle[1];
            List<Subscriber> snapshot = channel.beginCycle(dataJson, cycle);
            Delivery.Stamps stamps = new Delivery.Stamps(channel, cycle[0]);
            int total = snapshot.size();
            long delivered = 0;
            for (int i = 0; i < total; i++) {
                Subscriber subscriber = snapshot.get(i);
                Delivery delivery = new Delivery(subscriber, channel.name, stamps, total, i + 1, openSubscribers::get);
                if (deliver(subscriber, delivery)) {
                    delivered++;
                }
            }
            // The emit durations follow the deliveries' `sent`, taken as they are written.
            channel.endCycle(delivered);
            return new Published(cycle[0].seq(), total);
        } finally {
            channel.cycleLock.unlock();
        }
    }

    /** Hands one delivery over, unmade: the thread that writes it makes it (see {@link Delivery}). */
    private boolean deliver(Subscriber subscriber, Delivery delivery) {
        if (subscriber.longPoll() ? !subscriber.finish() : subscriber.isFinished()) {
            return false; // answered by another event, timed out or gone meanwhile
        }
        if (subscriber.longPoll()) {
            // Answered: out of every list before the client can read the answer, so a client
            // that asks /stats next never sees its own poll still open.
            unregister(subscriber);
        }
        boolean accepted;
        try {
            accepted = subscriber.sink().deliver(delivery);
        } catch (RuntimeException e) {
            accepted = false;
        }
        if (!accepted) {
            abandon(subscriber);
            return false;
        }
        stats.delivered(subscriber.transport());
        return true;
    }
}
