package serverlab.tomcatasync;

import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.ServletOutputStream;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import serverlab.core.Delivery;
import serverlab.core.PushSink;
import serverlab.core.RequestManager;
import serverlab.core.SseRequest;
import serverlab.core.SseStream;
import serverlab.core.Stats;

/**
 * One async SSE stream: the {@link PushSink} emitters write through, the timer's heartbeats
 * and end, and an {@link AsyncListener} for the container's error and completion. Every write
 * is serialized on this, so each message goes out whole and in the order its id was framed;
 * a failed write (the client left) ends the stream.
 */
final class AsyncSseStream implements AsyncListener, PushSink {
    private final AsyncContext async;
    private final RequestManager manager;
    private final Stats stats;
    private final ScheduledExecutorService timers;
    /** Guarded by this. */
    private SseStream stream;
    private Future<?> heartbeats;
    private Future<?> end;
    private boolean done;

    AsyncSseStream(AsyncContext async, RequestManager manager, Stats stats, ScheduledExecutorService timers) {
        this.async = async;
        this.manager = manager;
        this.stats = stats;
        this.timers = timers;
    }

    /** Registers and writes the opening; holding the lock keeps live deliveries behind it. */
    synchronized void start(SseRequest sse, Map<String, Long> lastEventId) {
        stream = manager.registerSse(sse.spec(), lastEventId, this);
        if (!write(stream.opening())) {
            return;
        }
        long heartbeatMs = sse.heartbeatMs();
        if (heartbeatMs > 0) {
            heartbeats = timers.scheduleAtFixedRate(this::heartbeat, heartbeatMs, heartbeatMs, TimeUnit.MILLISECONDS);
        }
        Long durationMs = sse.spec().durationMs();
        if (durationMs != null) {
            end = timers.schedule(this::timeUp, durationMs, TimeUnit.MILLISECONDS);
        }
    }

    @Override
    public synchronized boolean deliver(Delivery delivery) {
        return !done && write(stream.event(delivery.event(), delivery.seq(), delivery.body()));
    }

    private synchronized void heartbeat() {
        if (!done && write(SseStream.HEARTBEAT)) {
            stats.sseHeartbeat();
        }
    }

    private synchronized void timeUp() {
        byte[] last = manager.endStream(stream.subscriber());
        if (last != null && !done && write(SseStream.timeout(last))) {
            finish();
        }
    }

    /** One message, flushed at once; false (and the stream ended) when the client is gone. */
    private boolean write(byte[] message) {
        try {
            ServletOutputStream out = async.getResponse().getOutputStream();
            out.write(message);
            out.flush();
            return true;
        } catch (IOException | IllegalStateException clientGone) {
            manager.abandon(stream.subscriber());
            finish();
            return false;
        }
    }

    private void finish() {
        if (done) {
            return;
        }
        done = true;
        cancelTimers();
        async.complete();
    }

    private void cancelTimers() {
        if (heartbeats != null) {
            heartbeats.cancel(false);
        }
        if (end != null) {
            end.cancel(false);
        }
    }

    @Override
    public void onError(AsyncEvent event) {
        synchronized (this) {
            if (stream != null) {
                manager.abandon(stream.subscriber());
            }
            finish();
        }
    }

    @Override
    public void onComplete(AsyncEvent event) {
        synchronized (this) {
            done = true;
            cancelTimers();
            if (stream != null) {
                manager.abandon(stream.subscriber()); // a no-op when it ended; drops it when the client left
            }
        }
    }

    @Override
    public void onTimeout(AsyncEvent event) {
        // The container's timeout is off (0); the stream's own timer ends it.
    }

    @Override
    public void onStartAsync(AsyncEvent event) {
    }
}
