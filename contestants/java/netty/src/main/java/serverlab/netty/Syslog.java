package serverlab.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandler;
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
import io.netty.util.ReferenceCountUtil;
import java.nio.ByteBuffer;
import java.util.List;
import serverlab.core.Stats;
import serverlab.core.SyslogFramer;

/** The seed 002 syslog listener (spec §7): TCP with both framings, and UDP, on one port. */
final class Syslog {
    /** A deep socket buffer lets a UDP flood ride out short stalls of the event loop. */
    private static final int UDP_RECEIVE_BUFFER = 8 << 20;
    private static final int MAX_DATAGRAM = 65_536;

    private Syslog() {
    }

    static void listen(EventLoopGroup boss, EventLoopGroup workers, List<String> addresses, int port, Stats stats)
            throws InterruptedException {
        ServerBootstrap tcp = new ServerBootstrap().group(boss, workers).channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, 1024)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel channel) {
                        channel.pipeline().addLast(new TcpHandler(stats));
                    }
                });
        int bound = Main.bindAll(tcp, addresses, port);
        Bootstrap udp = new Bootstrap().group(workers).channel(NioDatagramChannel.class)
                .option(ChannelOption.SO_RCVBUF, UDP_RECEIVE_BUFFER)
                .option(ChannelOption.RCVBUF_ALLOCATOR, new FixedRecvByteBufAllocator(MAX_DATAGRAM))
                .handler(new UdpHandler(stats));
        for (String address : addresses) {
            udp.bind(address, bound).sync();
        }
    }

    /** One framer per connection: a message may be split across reads. */
    private static final class TcpHandler extends ChannelInboundHandlerAdapter {
        private final Stats stats;
        private final SyslogFramer framer;

        TcpHandler(Stats stats) {
            this.stats = stats;
            this.framer = new SyslogFramer(stats);
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

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    /** Stateless, so one serves the datagram channel of every address. */
    @ChannelHandler.Sharable
    private static final class UdpHandler extends SimpleChannelInboundHandler<DatagramPacket> {
        private final Stats stats;

        UdpHandler(Stats stats) {
            this.stats = stats;
        }

        @Override
        protected void channelRead0(ChannelHandlerContext ctx, DatagramPacket packet) {
            SyslogFramer.countDatagram(stats, packet.content().nioBuffer());
        }
    }
}
