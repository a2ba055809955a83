package serverlab.netty;

import io.grpc.Attributes;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerStreamTracer;
import io.grpc.ServerTransportFilter;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.ssl.SslContext;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import serverlab.core.RequestManager;
import serverlab.core.Stats;

/**
 * The gRPC server of spec §16 with its own listeners ({@code grpc_listener = "own"}):
 * grpc-netty's {@link NettyServerBuilder} on the contestant's own boss and worker event
 * loops, with a direct executor, so that every call runs on the event loop of its connection
 * as every HTTP request does. One server per listen address, all on one port.
 */
final class GrpcServers {
    /** Spec §16: request messages up to 4 MiB encoded are served (grpc-java's default too). */
    static final int MAX_MESSAGE = 4 * 1024 * 1024;
    private static final Attributes.Key<Boolean> COUNTED = Attributes.Key.create("serverlab.counted");

    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final int backlog;
    private final Stats stats;
    private final LabService service;
    private final List<Server> started = new ArrayList<>();

    GrpcServers(EventLoopGroup boss, EventLoopGroup workers, int backlog, Stats stats, RequestManager manager) {
        this.boss = boss;
        this.workers = workers;
        this.backlog = backlog;
        this.stats = stats;
        this.service = new LabService(manager);
    }

    /**
     * Listens on {@code port} of every address (0: a free port, the first address's for the
     * others), with TLS when {@code tls} is not null; returns the port.
     */
    int listen(List<String> addresses, int port, SslContext tls) throws IOException {
        stats.serveGrpc();
        int bound = port;
        for (String address : addresses) {
            Server server = builder(new InetSocketAddress(address, bound), tls).build().start();
            started.add(server);
            bound = ((InetSocketAddress) server.getListenSockets().get(0)).getPort();
        }
        return bound;
    }

    /** Stops every listener and its calls; the event loops are the contestant's and stay. */
    void stop() {
        for (Server server : started) {
            server.shutdownNow();
        }
    }

    private NettyServerBuilder builder(InetSocketAddress address, SslContext tls) {
        NettyServerBuilder builder = NettyServerBuilder.forAddress(address)
                .bossEventLoopGroup(boss).workerEventLoopGroup(workers)
                .channelType(NioServerSocketChannel.class)
                .withOption(ChannelOption.SO_BACKLOG, backlog)
                .withChildOption(ChannelOption.TCP_NODELAY, true)
                .directExecutor()
                .maxInboundMessageSize(MAX_MESSAGE)
                .addService(service)
                .addStreamTracerFactory(new CallCounter())
                .addTransportFilter(new ConnectionFilter());
        return tls == null ? builder : builder.sslContext(tls);
    }

    /**
     * {@code /stats} grpc.calls: every call that reached the server, whatever its method; and
     * requests.total, as a call is an HTTP/2 request (§5) that no HTTP handler here reads.
     */
    private final class CallCounter extends ServerStreamTracer.Factory {
        @Override
        public ServerStreamTracer newServerStreamTracer(String fullMethodName, Metadata headers) {
            stats.requestRead();
            stats.grpcCall();
            return new ServerStreamTracer() {
            };
        }
    }

    /** {@code /stats} connections: the gRPC ports' connections count as every other port's. */
    private final class ConnectionFilter extends ServerTransportFilter {
        @Override
        public Attributes transportReady(Attributes attributes) {
            stats.connectionOpened();
            return attributes.toBuilder().set(COUNTED, true).build();
        }

        @Override
        public void transportTerminated(Attributes attributes) {
            // A connection that never became ready (a failed handshake) was never counted.
            if (attributes != null && Boolean.TRUE.equals(attributes.get(COUNTED))) {
                stats.connectionClosed();
            }
        }
    }
}
