package serverlab.tomcatblocking;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import serverlab.core.ControlApi;
import serverlab.core.Delivery;
import serverlab.core.SseRequest;
import serverlab.core.SseStream;
import serverlab.core.Subscriber;
import serverlab.tomcat.SseServlet;

/**
 * {@code GET /sse} in the thread-per-request model: the request thread registers, writes the
 * opening, then blocks on its own inbox until a delivery comes, a heartbeat is due or the
 * duration has passed, and writes that; it makes a delivery (its {@code sent}) right before
 * writing it. It learns that its client left only when a write fails: the heartbeats (spec
 * §10) are what lets it notice.
 */
public final class BlockingSseServlet extends SseServlet {
    private static final long serialVersionUID = 1L;

    public BlockingSseServlet(ControlApi control) {
        super(control);
    }

    /**
     * The stream's deliveries. Closed under its own lock, so a delivery is either taken before
     * the stream ends (and written) or refused (and not counted).
     */
    private static final class Inbox {
        private final LinkedBlockingQueue<Delivery> queue = new LinkedBlockingQueue<>();
        private boolean closed;

        synchronized boolean offer(Delivery delivery) {
            return !closed && queue.offer(delivery);
        }

        /** Refuses every later delivery; the ones already in are returned, in order. */
        synchronized List<Delivery> close() {
            closed = true;
            List<Delivery> rest = new ArrayList<>();
            queue.drainTo(rest);
            return rest;
        }

        /** The next delivery, waiting at most {@code nanos}; null when none came. */
        Delivery poll(long nanos) throws InterruptedException {
            return nanos > 0 ? queue.poll(nanos, TimeUnit.NANOSECONDS) : queue.poll();
        }

        Delivery take() throws InterruptedException {
            return queue.take();
        }
    }

    @Override
    protected void stream(HttpServletRequest request, HttpServletResponse response, SseRequest sse,
            Map<String, Long> lastEventId) throws IOException {
        startStream(request, response);
        Inbox inbox = new Inbox();
        SseStream stream = manager.registerSse(sse.spec(), lastEventId, inbox::offer);
        try {
            ServletOutputStream out = response.getOutputStream();
            write(out, stream.opening());
            run(stream, inbox, sse, out);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("server stopping");
        } finally {
            manager.abandon(stream.subscriber()); // a no-op when it timed out; drops it when the client left
        }
    }

    private void run(SseStream stream, Inbox inbox, SseRequest sse, ServletOutputStream out)
            throws IOException, InterruptedException {
        long started = System.nanoTime();
        long heartbeat = TimeUnit.MILLISECONDS.toNanos(sse.heartbeatMs());
        long nextBeat = started + heartbeat;
        Long durationMs = sse.spec().durationMs();
        long deadline = durationMs == null ? 0 : started + TimeUnit.MILLISECONDS.toNanos(durationMs);
        while (true) {
            long now = System.nanoTime();
            long wait = Long.MAX_VALUE;
            if (heartbeat > 0) {
                wait = nextBeat - now;
            }
            if (durationMs != null) {
                wait = Math.min(wait, deadline - now);
            }
            Delivery delivery = wait == Long.MAX_VALUE ? inbox.take() : inbox.poll(wait);
            now = System.nanoTime();
            if (delivery != null) {
                write(out, stream.event(delivery.event(), delivery.seq(), delivery.body()));
            } else if (durationMs != null && now - deadline >= 0) {
                end(stream, inbox, out);
                return;
            } else if (heartbeat > 0 && now - nextBeat >= 0) {
                write(out, SseStream.HEARTBEAT);
                stats.sseHeartbeat();
                nextBeat += heartbeat;
            }
        }
    }

    /** The duration has passed: what is still in the inbox, then the timeout message. */
    private void end(SseStream stream, Inbox inbox, ServletOutputStream out) throws IOException {
        Subscriber subscriber = stream.subscriber();
        byte[] last = manager.endStream(subscriber);
        for (Delivery delivery : inbox.close()) {
            write(out, stream.event(delivery.event(), delivery.seq(), delivery.body()));
        }
        if (last != null) {
            write(out, SseStream.timeout(last));
        }
    }

    private static void write(ServletOutputStream out, byte[] message) throws IOException {
        out.write(message);
        out.flush();
    }
}
