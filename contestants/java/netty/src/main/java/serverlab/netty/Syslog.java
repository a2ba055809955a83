package serverlab.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.FixedRecvByteBufAllocator;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.socket.DatagramPacket;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.ssl.SslCloseCompletionEvent;
import io.netty.handler.ssl.SslContext;
import io.netty.util.ReferenceCountUtil;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.function.Consumer;
import serverlab.core.Stats;
import serverlab.core.SyslogFramer;
import serverlab.core.SyslogParsing;

/**
 * The seed 002 syslog listener (spec §7): TCP with both framings, and UDP, on one port; and
 * RFC 5425 syslog over TLS on a port of its own (spec §15). In parse mode (spec §7.1) every
 * message is parsed too, on the event loop that read it.
 */
final class Syslog {
    /** A deep socket buffer lets a UDP flood ride out short stalls of the event loop. */
    private static final int UDP_RECEIVE_BUFFER = 8 << 20;
    private static final int MAX_DATAGRAM = 65_536;

    private Syslog() {
    }

    /** Binds TCP and UDP on {@code port} (0: a free one) at every address; returns the port. */
    static int listen(EventLoopGroup boss, EventLoopGroup workers, List<String> addresses, int port, Stats stats,
            SyslogParsing parsing) throws InterruptedException {
        int bound = Main.bindAll(tcp(boss, workers,
                channel -> channel.pipeline().addLast(new TcpHandler(stats, new SyslogFramer(stats, parsing)))),
                addresses, port);
        Bootstrap udp = new Bootstrap().group(workers).channel(NioDatagramChannel.class)
                .option(ChannelOption.SO_RCVBUF, UDP_RECEIVE_BUFFER)
                .option(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(MAX_DATAGRAM))
                .handler(new ChannelInitializer<NioDatagramChannel>() {
                    @Override
                    protected void initChannel(NioDatagramChannel channel) {
                        channel.pipeline().addLast(new UdpHandler(stats, parsing));
                    }
                });
        for (String address : addresses) {
            udp.bind(address, bound).sync();
        }
        return bound;
    }

    /**
     * Spec §15, RFC 5425: TLS as on the HTTPS port (versions, AEAD suites, the certificate),
     * then octet-counted frames, counted and parsed as TCP's. A bad MSG-LEN closes the
     * connection, the SslHandler sending close_notify first. Returns the bound port.
     */
    static int listenTls(EventLoopGroup boss, EventLoopGroup workers, List<String> addresses, int port, Stats stats,
            SyslogParsing parsing, SslContext tls) throws InterruptedException {
        return Main.bindAll(tcp(boss, workers, channel -> channel.pipeline().addLast(tls.newHandler(channel.alloc()),
                new TcpHandler(stats, SyslogFramer.octetCounting(stats, parsing, channel::close)))), addresses, port);
    }

    /** A syslog TCP server whose connections get {@code handlers}. */
    private static ServerBootstrap tcp(EventLoopGroup boss, EventLoopGroup workers, Consumer<SocketChannel> handlers) {
        return new ServerBootstrap().group(boss, workers).channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, 1024)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel channel) {
                        handlers.accept(channel);
                    }
                });
    }

    /** One framer per connection: a message may be split across reads. */
    private static final class TcpHandler extends ChannelInboundHandlerAdapter {
        private final Stats stats;
        private final SyslogFramer framer;

        TcpHandler(Stats stats, SyslogFramer framer) {
            this.stats = stats;
            this.framer = framer;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) throws Exception {
            stats.syslogConnection();
            super.channelActive(ctx);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            try {
                for (ByteBuffer chunk : ((ByteBuf) msg).nioBuffers()) {
                    framer.feed(chunk);
                }
            } finally {
                ReferenceCountUtil.release(msg);
            }
        }

        /** The client's close_notify (RFC 5425 §4.4): answered with the server's, then the close. */
        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) throws Exception {
            if (evt instanceof SslCloseCompletionEvent) {
                ctx.close();
            }
            super.userEventTriggered(ctx, evt);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    /** One per datagram channel: its parse tally belongs to that channel's event loop. */
    private static final class UdpHandler extends SimpleChannelInboundHandler<DatagramPacket> {
        private final Stats stats;
        private final SyslogParsing.Tally tally;

        UdpHandler(Stats stats, SyslogParsing parsing) {
            this.stats = stats;
            this.tally = parsing.parses() ? parsing.tally() : null;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, DatagramPacket packet) {
            SyslogFramer.countDatagram(stats, packet.content().nioBuffer(), tally);
        }
    }
}
