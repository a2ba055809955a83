package serverlab.netty;

import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import serverlab.core.ControlApi;
import serverlab.core.Delivery;
import serverlab.core.PushSink;
import serverlab.core.RequestManager;
import serverlab.core.SseRequest;
import serverlab.core.SseStream;
import serverlab.core.Stats;

/**
 * One SSE stream (spec §10) on a channel. Like a comet stream, deliveries reach the channel's
 * event loop as tasks, so every message is made (its {@code sent}), framed (its id) and written
 * there, in order; the heartbeats and the end are scheduled on the same loop. A closed channel is noticed at once.
 */
final class SseExchange implements PushSink {
    private final ChannelHandlerContext ctx;
    private final Channel channel;
    private final RequestManager manager;
    private final Stats stats;
    private final ResponseLog log;
    private final HttpRequest httpRequest;
    private final boolean keepAlive;
    private final ChannelFutureListener onClose = closed -> abandon();
    private SseStream stream;
    private ScheduledFuture<?> heartbeats;
    private ScheduledFuture<?> timer;
    /** The response is complete; read and written on the event loop only. */
    private boolean ended;
    /** The stream's time is up: no delivery is taken any more. Guarded by this. */
    private boolean claimed;

    SseExchange(ChannelHandlerContext ctx, ControlApi control, HttpRequest httpRequest, boolean keepAlive) {
        this.ctx = ctx;
        this.channel = ctx.channel();
        this.manager = control.requestManager();
        this.stats = control.counters();
        this.log = new ResponseLog(control);
        this.httpRequest = httpRequest;
        this.keepAlive = keepAlive;
    }

    /** Runs on the event loop: the header section, then the opening, then live. */
    void start(SseRequest sse, Map<String, Long> lastEventId) {
        HttpResponse head = HttpResponses.head(SseStream.CONTENT_TYPE, -1);
        head.headers().set(HttpHeaderNames.CACHE_CONTROL, HttpHeaderValues.NO_CACHE);
        HttpResponses.markConnection(head, keepAlive);
        log.responded(httpRequest, 200); // counted before the client can see it
        ctx.write(head);
        stream = manager.registerSse(sse.spec(), lastEventId, this);
        send(stream.opening());
        long heartbeatMs = sse.heartbeatMs();
        if (heartbeatMs > 0) {
            heartbeats = ctx.executor().scheduleAtFixedRate(this::heartbeat, heartbeatMs, heartbeatMs,
                    TimeUnit.MILLISECONDS);
        }
        Long durationMs = sse.spec().durationMs();
        if (durationMs != null) {
            timer = ctx.executor().schedule(this::timeUp, durationMs, TimeUnit.MILLISECONDS);
        }
        channel.closeFuture().addListener(onClose);
    }

    /** Called on an emitter thread. */
    @Override
    public synchronized boolean deliver(Delivery delivery) {
        if (claimed || !channel.isActive()) {
            return false;
        }
        channel.eventLoop().execute(() -> {
            if (!ended) {
                send(stream.event(delivery.event(), delivery.seq(), delivery.body()));
            }
        });
        return true;
    }

    private void heartbeat() {
        if (!ended) {
            send(SseStream.HEARTBEAT);
            stats.sseHeartbeat();
        }
    }

    private void timeUp() {
        byte[] last;
        synchronized (this) {
            claimed = true;
            last = manager.endStream(stream.subscriber());
        }
        if (last != null) {
            // Queued behind the deliveries taken before the claim, so they are written first.
            channel.eventLoop().execute(() -> finish(SseStream.timeout(last)));
        }
    }

    private void send(byte[] message) {
        if (!ended) {
            ctx.writeAndFlush(new DefaultHttpContent(Unpooled.wrappedBuffer(message)));
        }
    }

    private void finish(byte[] last) {
        if (ended) {
            return;
        }
        ctx.write(new DefaultHttpContent(Unpooled.wrappedBuffer(last)));
        ChannelFuture done = ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
        HttpResponses.closeUnlessKeptAlive(done, keepAlive);
        stop();
        // A kept-alive connection serves many requests; it must not collect one listener per stream.
        channel.closeFuture().removeListener(onClose);
    }

    private void abandon() {
        stop();
        manager.abandon(stream.subscriber());
    }

    private void stop() {
        ended = true;
        if (heartbeats != null) {
            heartbeats.cancel(false);
        }
        if (timer != null) {
            timer.cancel(false);
        }
    }
}
