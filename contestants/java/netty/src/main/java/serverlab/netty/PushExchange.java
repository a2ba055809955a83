package serverlab.netty;

import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.DefaultHttpContent;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponse;
import io.netty.handler.codec.http.LastHttpContent;
import io.netty.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import serverlab.core.ControlApi;
import serverlab.core.Delivery;
import serverlab.core.PushSink;
import serverlab.core.PushSpec;
import serverlab.core.RequestManager;
import serverlab.core.Subscriber;

/**
 * One long poll or comet stream on a channel. Emitter threads hand deliveries over as tasks
 * on the channel's event loop, so every write, the timeout and the end of the response happen
 * on that one thread in order, without locks. The loop makes each delivery (its {@code sent})
 * right before writing and flushing it (spec §6).
 */
final class PushExchange implements PushSink {
    private static final String COMET_CONTENT_TYPE = "application/x-ndjson";
    private final ChannelHandlerContext ctx;
    private final Channel channel;
    private final RequestManager manager;
    private final ResponseLog log;
    private final HttpRequest httpRequest;
    private final boolean keepAlive;
    private final ChannelFutureListener onClose = closed -> abandon();
    private boolean longPoll;
    private Subscriber request;
    private ScheduledFuture<?> timer;
    /** The response is complete; read and written on the event loop only. */
    private boolean ended;

    PushExchange(ChannelHandlerContext ctx, ControlApi control, HttpRequest httpRequest, boolean keepAlive) {
        this.ctx = ctx;
        this.channel = ctx.channel();
        this.manager = control.requestManager();
        this.log = new ResponseLog(control);
        this.httpRequest = httpRequest;
        this.keepAlive = keepAlive;
    }

    /** Runs on the event loop. */
    void start(PushSpec spec) {
        longPoll = spec.longPoll();
        if (!longPoll) {
            HttpResponse head = HttpResponses.head(COMET_CONTENT_TYPE, -1);
            HttpResponses.markConnection(head, keepAlive);
            log.responded(httpRequest, 200); // counted before the client can see it
            ctx.writeAndFlush(head);
        }
        request = manager.register(spec, this);
        if (spec.durationMs() != null) {
            timer = ctx.executor().schedule(this::timeUp, spec.durationMs(), TimeUnit.MILLISECONDS);
        }
        channel.closeFuture().addListener(onClose);
    }

    /** Called on an emitter thread. */
    @Override
    public boolean deliver(Delivery delivery) {
        if (!channel.isActive()) {
            return false;
        }
        channel.eventLoop().execute(() -> {
            if (!ended) {
                write(delivery.body(), longPoll);
            }
        });
        return true;
    }

    private void timeUp() {
        byte[] answer = manager.timeout(request);
        if (answer != null) { // null: a delivery claimed it first and its write task is queued
            write(answer, true);
        }
    }

    private void write(byte[] body, boolean last) {
        if (ended) {
            return;
        }
        if (longPoll) {
            log.responded(httpRequest, 200);
            HttpResponses.send(ctx, HttpResponses.json(body), keepAlive);
        } else {
            ctx.write(new DefaultHttpContent(Unpooled.wrappedBuffer(body)));
            if (!last) {
                ctx.flush();
                return;
            }
            ChannelFuture done = ctx.writeAndFlush(LastHttpContent.EMPTY_LAST_CONTENT);
            HttpResponses.closeUnlessKeptAlive(done, keepAlive);
        }
        end();
    }

    private void end() {
        ended = true;
        if (timer != null) {
            timer.cancel(false);
        }
        // A kept-alive connection serves many polls; it must not collect one listener per poll.
        channel.closeFuture().removeListener(onClose);
    }

    private void abandon() {
        ended = true;
        if (timer != null) {
            timer.cancel(false);
        }
        manager.abandon(request);
    }
}
