package serverlab.netty;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.ssl.SslContext;
import io.netty.util.Version;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import serverlab.core.Args;
import serverlab.core.ControlApi;
import serverlab.core.DocRoot;
import serverlab.core.ListenAddresses;
import serverlab.core.RequestManager;
import serverlab.core.Stats;
import serverlab.core.SyslogParsing;

/**
 * java-netty: Netty NIO event loops, one per core, for HTTP, gRPC (grpc-netty on the same
 * loops) and the syslog listener, on 127.0.0.1 and the {@code --host} address when that is
 * another. (The native epoll
 * transport's Linux jars are not served by the registry this project builds from.)
 */
public final class Main {
    private Main() {
    }

    /**
     * A started server, for tests: its HTTP, syslog TLS and gRPC ports (0: none), and a way to
     * stop it.
     */
    record Running(int port, int syslogTlsPort, int grpcPort, int grpcTlsPort, GrpcServers grpc,
            EventLoopGroup boss, EventLoopGroup workers) {
        void stop() {
            grpc.stop();
            boss.shutdownGracefully(0, 0, TimeUnit.SECONDS).syncUninterruptibly();
            workers.shutdownGracefully(0, 0, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    public static void main(String[] argv) throws Exception {
        Running running;
        try {
            Args args = new Args(argv);
            if (args.has("version")) {
                System.out.println("java " + Runtime.version() + " (" + System.getProperty("java.vm.vendor") + "), netty "
                        + Version.identify().get("netty-common").artifactVersion() + " (nio), grpc-java "
                        + io.grpc.netty.NettyServerBuilder.class.getPackage().getImplementationVersion() + " (grpc-netty), jackson "
                        + com.fasterxml.jackson.databind.cfg.PackageVersion.VERSION);
                return;
            }
            running = start(args);
        } catch (IllegalArgumentException e) {
            // A bad start argument (an unknown --syslog-mode, a missing value): one line, exit 2.
            System.err.println("java-netty: " + e.getMessage());
            System.exit(2);
            return;
        }
        running.boss().terminationFuture().sync();
    }

    /** Binds every listen address; {@code --port 0} takes a free port, the same on all of them. */
    static Running start(Args args) throws IOException, InterruptedException {
        Stats stats = new Stats("java-netty");
        RequestManager manager = new RequestManager(stats);
        ControlApi control = new ControlApi(stats, manager);
        DocRoot docRoot = new DocRoot(Path.of(args.string("docroot", ".")));
        List<String> addresses = ListenAddresses.of(args);
        int loops = args.integer("threads", 0);
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup workers = new NioEventLoopGroup(loops > 0 ? loops : Runtime.getRuntime().availableProcessors());
        // Syslog first: readiness is judged on the HTTP port, so it must open last.
        int syslogTlsPort = syslog(args, boss, workers, addresses, stats);
        GrpcServers grpc = new GrpcServers(boss, workers, args.integer("backlog", 1024), stats, manager);
        int grpcPort = args.has("grpc-port") ? grpc.listen(addresses, Integer.parseInt(args.required("grpc-port")), null) : 0;
        int grpcTlsPort = args.has("grpc-tls-port")
                ? grpc.listen(addresses, Integer.parseInt(args.required("grpc-tls-port")),
                        Tls.grpcContext(args.required("tls-cert"), args.required("tls-key")))
                : 0;
        ConnectionCounter counter = new ConnectionCounter(stats);
        Pipelines.Hardening shipped = Pipelines.Hardening.SHIPPED;
        Pipelines pipelines = new Pipelines(control, docRoot, new Pipelines.Hardening(
                args.integer("h2-max-streams", shipped.maxStreams()),
                args.integer("h2-max-resets", shipped.maxResets()),
                args.integer("h2-reset-window-s", shipped.resetWindowS()),
                args.integer("header-timeout-ms", 0)));
        // Spec §12-§14: TLS (HTTP/1.1 or h2 by ALPN) and h2c beside the HTTP port, bound
        // first so that readiness, judged on the HTTP port, finds them all open.
        if (args.has("tls-port")) {
            SslContext tls = Tls.context(args.required("tls-cert"), args.required("tls-key"));
            bindAll(bootstrap(boss, workers, args, counter, channel -> {
                channel.pipeline().addLast(tls.newHandler(channel.alloc()), pipelines.byAlpn());
            }), addresses, Integer.parseInt(args.required("tls-port")));
        }
        if (args.has("h2c-port")) {
            bindAll(bootstrap(boss, workers, args, counter, channel -> pipelines.http2(channel.pipeline())),
                    addresses, Integer.parseInt(args.required("h2c-port")));
        }
        ServerBootstrap http = bootstrap(boss, workers, args, counter,
                channel -> pipelines.http1(channel.pipeline(), false));
        int port = bindAll(http, addresses, Integer.parseInt(args.required("port")));
        return new Running(port, syslogTlsPort, grpcPort, grpcTlsPort, grpc, boss, workers);
    }

    /**
     * The syslog ports (spec §7, §15), in the mode of {@code --syslog-mode} (§7.1, count
     * unless it says parse); returns the syslog TLS port, or 0 without one.
     */
    private static int syslog(Args args, EventLoopGroup boss, EventLoopGroup workers, List<String> addresses,
            Stats stats) throws IOException, InterruptedException {
        SyslogParsing parsing = SyslogParsing.mode(args.string("syslog-mode", "count"));
        stats.syslogParsing(parsing);
        if (args.has("syslog-port")) {
            Syslog.listen(boss, workers, addresses, Integer.parseInt(args.required("syslog-port")), stats, parsing);
        }
        if (!args.has("syslog-tls-port")) {
            return 0;
        }
        SslContext tls = Tls.syslogContext(args.required("tls-cert"), args.required("tls-key"));
        return Syslog.listenTls(boss, workers, addresses, Integer.parseInt(args.required("syslog-tls-port")), stats,
                parsing, tls);
    }

    /** A bootstrap whose connections are counted, then given their handlers by {@code protocol}. */
    private static ServerBootstrap bootstrap(EventLoopGroup boss, EventLoopGroup workers, Args args,
            ConnectionCounter counter, Consumer<SocketChannel> protocol) {
        return new ServerBootstrap().group(boss, workers).channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, args.integer("backlog", 1024))
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel channel) {
                        channel.pipeline().addLast(counter);
                        protocol.accept(channel);
                    }
                });
    }

    /** Binds the first address, then the others on the port it got; returns that port. */
    static int bindAll(ServerBootstrap bootstrap, List<String> addresses, int port) throws InterruptedException {
        Channel first = bootstrap.bind(addresses.get(0), port).sync().channel();
        int bound = ((InetSocketAddress) first.localAddress()).getPort();
        for (String address : addresses.subList(1, addresses.size())) {
            bootstrap.bind(address, bound).sync();
        }
        return bound;
    }
}
