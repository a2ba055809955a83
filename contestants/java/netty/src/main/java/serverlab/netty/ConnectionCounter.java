package serverlab.netty;

import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import serverlab.core.Stats;

/**
 * Counts HTTP connections for {@code /stats}. First in every pipeline, so it stays when a
 * connection upgrades to WebSocket and its HTTP handlers are replaced.
 */
@ChannelHandler.Sharable
final class ConnectionCounter extends ChannelInboundHandlerAdapter {
    private final Stats stats;

    ConnectionCounter(Stats stats) {
        this.stats = stats;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) throws Exception {
        stats.connectionOpened();
        super.channelActive(ctx);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
        stats.connectionClosed();
        super.channelInactive(ctx);
    }
}
