package serverlab.core;

import java.util.concurrent.atomic.AtomicBoolean;

/** One registered long poll or comet stream. */
public final class PushRequest {
    private final PushSpec spec;
    private final PushSink sink;
    private final long created;
    private final int startCount;
    /** Set once: the long poll was answered, or the stream ended; decides races with the timeout. */
    private final AtomicBoolean finished = new AtomicBoolean();
    private final AtomicBoolean registered = new AtomicBoolean(true);

    PushRequest(PushSpec spec, PushSink sink, long created, int startCount) {
        this.spec = spec;
        this.sink = sink;
        this.created = created;
        this.startCount = startCount;
    }

    public PushSpec spec() {
        return spec;
    }

    public boolean longPoll() {
        return spec.longPoll();
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

    boolean unregisterOnce() {
        return registered.compareAndSet(true, false);
    }
}
