package serverlab.netty;

import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.LastHttpContent;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * The header_timeout_ms tunable (suites/abuse.toml's hardened runs): a connection must send a
 * whole request head within the timeout, from its opening and from the end of its last
 * request, or it is closed; a slowloris client, which trickles a header line a second, and an
 * idle one are cut off, as by Tomcat's connectionTimeout and nginx's client_header_timeout.
 * A read timeout (Netty's ReadTimeoutHandler) would not: the slowloris client keeps reading.
 */
final class HeaderTimeout extends ChannelDuplexHandler {
    private final long timeoutMs;
    private ScheduledFuture<?> due;

    HeaderTimeout(long timeoutMs) {
        this.timeoutMs = timeoutMs;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        if (ctx.channel().isActive()) {
            arm(ctx);
        }
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        arm(ctx);
        ctx.fireChannelActive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (msg instanceof HttpRequest) {
            disarm();
        }
        if (msg instanceof LastHttpContent) {
            arm(ctx); // the next request's head is due in its turn
        }
        ctx.fireChannelRead(msg);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        disarm();
        ctx.fireChannelInactive();
    }

    private void arm(ChannelHandlerContext ctx) {
        disarm();
        due = ctx.executor().schedule(() -> {
            ctx.close();
        }, timeoutMs, TimeUnit.MILLISECONDS);
    }

    private void disarm() {
        if (due != null) {
            due.cancel(false);
            due = null;
        }
    }
}
