package serverlab.core;

import java.util.concurrent.atomic.AtomicBoolean;

/** One registered subscriber: a long poll, a comet stream, an SSE stream, a WebSocket or a gRPC stream. */
public final class Subscriber {
    private final PushSpec spec;
    private final PushSink sink;
    private final long created;
    private final int startCount;
    /** Set once: the long poll was answered, or the stream ended; decides races with the timeout. */
    private final AtomicBoolean finished = new AtomicBoolean();
    private final AtomicBoolean registered = new AtomicBoolean(true);

    Subscriber(PushSpec spec, PushSink sink, long created, int startCount) {
        this.spec = spec;
        this.sink = sink;
        this.created = created;
        this.startCount = startCount;
    }

    public PushSpec spec() {
        return spec;
    }

    public Transport transport() {
        return spec.transport();
    }

    public boolean longPoll() {
        return spec.transport() == Transport.LONGPOLL;
    }

    PushSink sink() {
        return sink;
    }

    long created() {
        return created;
    }

    int startCount() {
        return startCount;
    }

    /** Claims the right to send the final answer; true for exactly one caller. */
    boolean finish() {
        return finished.compareAndSet(false, true);
    }

    public boolean isFinished() {
        return finished.get();
    }

    /** Still in its events' lists: not yet answered (a long poll), ended or dropped. */
    boolean registered() {
        return registered.get();
    }

    boolean unregisterOnce() {
        return registered.compareAndSet(true, false);
    }
}
