package serverlab.core;

import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntSupplier;

/**
 * One delivery of an emit cycle to one subscriber, handed to its {@link PushSink} not yet
 * made: the thread that writes it calls {@link #body()} immediately before the write that
 * hands it to the kernel, so its {@code sent} (spec §6) is the moment of that write and not
 * the moment the cycle queued it for another thread.
 */
public final class Delivery {
    private final Subscriber subscriber;
    private final String event;
    private final Stamps cycle;
    private final int total;
    private final int place;
    private final IntSupplier openSubscribers;

    Delivery(Subscriber subscriber, String event, Stamps cycle, int total, int place, IntSupplier openSubscribers) {
        this.subscriber = subscriber;
        this.event = event;
        this.cycle = cycle;
        this.total = total;
        this.place = place;
        this.openSubscribers = openSubscribers;
    }

    /** The event's name. */
    public String event() {
        return event;
    }

    /** The cycle's seq (an SSE message's id names it). */
    public long seq() {
        return cycle.cycle.seq();
    }

    /**
     * The §6 delivery document, with {@code sent} taken now: call it right before writing it,
     * once. It also raises the cycle's emit duration to this {@code sent}.
     */
    public byte[] body() {
        long sent = cycle.stamp();
        // connections.finish counts the subscriber itself: an answered long poll has already
        // left every list by the time its delivery is written.
        int finish = openSubscribers.getAsInt() + (subscriber.registered() ? 0 : 1);
        return Deliveries.event(subscriber, event, cycle.cycle, sent, total, place, finish, false);
    }

    /**
     * The delivery's fields with {@code sent} taken now, for a transport that encodes them
     * itself (gRPC's {@code Delivery} message, spec §16): call it right before the write, once,
     * instead of {@link #body()}. It also raises the cycle's emit duration to this {@code sent}.
     */
    public Stamped stamped() {
        long sent = cycle.stamp();
        EventChannel.Cycle made = cycle.cycle;
        return new Stamped(event, made.seq(), made.created(), sent, total, place, made.dataJson());
    }

    /** One delivery as §6 defines it; {@code dataJson} is a publish cycle's data, else null. */
    public record Stamped(String event, long seq, long created, long sent, int total, int place, String dataJson) {
    }

    /**
     * One emit cycle as its deliveries see it while they are written: the latest {@code sent}
     * so far ({@code created} before the first), which each new later stamp raises, and the
     * channel whose emit durations follow it.
     */
    static final class Stamps {
        private final EventChannel channel;
        private final EventChannel.Cycle cycle;
        private final AtomicLong lastSent;

        Stamps(EventChannel channel, EventChannel.Cycle cycle) {
            this.channel = channel;
            this.cycle = cycle;
            this.lastSent = new AtomicLong(cycle.created());
        }

        /** A delivery's {@code sent}, now; the cycle's emit duration runs to the latest. */
        long stamp() {
            long sent = System.currentTimeMillis();
            long last = lastSent.get();
            while (sent > last) {
                if (lastSent.compareAndSet(last, sent)) {
                    channel.raiseEmitDuration(cycle.seq(), sent - cycle.created(), sent - last);
                    break;
                }
                last = lastSent.get();
            }
            return sent;
        }
    }
}
