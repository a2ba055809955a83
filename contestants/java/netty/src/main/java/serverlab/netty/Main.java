package serverlab.netty;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpServerExpectContinueHandler;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.stream.ChunkedWriteHandler;
import io.netty.util.Version;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import serverlab.core.Args;
import serverlab.core.ControlApi;
import serverlab.core.DocRoot;
import serverlab.core.ListenAddresses;
import serverlab.core.RequestManager;
import serverlab.core.Stats;

/**
 * java-netty: Netty NIO event loops, one per core, for HTTP and the syslog listener, on
 * 127.0.0.1 and the {@code --host} address when that is another. (The native epoll
 * transport's Linux jars are not served by the registry this project builds from.)
 */
public final class Main {
    private static final int MAX_INITIAL_LINE = 16 * 1024;
    /** Spec §8: header sections up to 64 KiB are read; larger ones get 431. */
    private static final int MAX_HEADER_SIZE = 64 * 1024;
    private static final int MAX_CHUNK_SIZE = 64 * 1024;

    private Main() {
    }

    /** A started server, for tests: its HTTP port, and a way to stop it. */
    record Running(int port, EventLoopGroup boss, EventLoopGroup workers) {
        void stop() {
            boss.shutdownGracefully(0, 0, TimeUnit.SECONDS).syncUninterruptibly();
            workers.shutdownGracefully(0, 0, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        if (args.has("version")) {
            System.out.println("java " + Runtime.version() + " (" + System.getProperty("java.vm.vendor") + "), netty "
                    + Version.identify().get("netty-common").artifactVersion() + " (nio), jackson " + com.fasterxml.jackson.databind.cfg.PackageVersion.VERSION);
            return;
        }
        start(args).boss().terminationFuture().sync();
    }

    /** Binds every listen address; {@code --port 0} takes a free port, the same on all of them. */
    static Running start(Args args) throws IOException, InterruptedException {
        Stats stats = new Stats("java-netty");
        ControlApi control = new ControlApi(stats, new RequestManager(stats));
        DocRoot docRoot = new DocRoot(Path.of(args.string("docroot", ".")));
        List<String> addresses = ListenAddresses.of(args);
        int loops = args.integer("threads", 0);
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup workers = new NioEventLoopGroup(loops > 0 ? loops : Runtime.getRuntime().availableProcessors());
        // Syslog first: readiness is judged on the HTTP port, so it must open last.
        if (args.has("syslog-port")) {
            Syslog.listen(boss, workers, addresses, Integer.parseInt(args.required("syslog-port")), stats);
        }
        ConnectionCounter counter = new ConnectionCounter(stats);
        // Spec §12: the same pipeline behind an SslHandler on the TLS port, bound first so
        // that readiness, judged on the HTTP port, finds both open.
        if (args.has("tls-port")) {
            SslContext tls = Tls.context(args.required("tls-cert"), args.required("tls-key"));
            bindAll(bootstrap(boss, workers, args, counter, control, docRoot, tls), addresses,
                    Integer.parseInt(args.required("tls-port")));
        }
        ServerBootstrap http = bootstrap(boss, workers, args, counter, control, docRoot, null);
        int port = bindAll(http, addresses, Integer.parseInt(args.required("port")));
        return new Running(port, boss, workers);
    }

    private static ServerBootstrap bootstrap(EventLoopGroup boss, EventLoopGroup workers, Args args,
            ConnectionCounter counter, ControlApi control, DocRoot docRoot, SslContext tls) {
        return new ServerBootstrap().group(boss, workers).channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, args.integer("backlog", 1024))
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel channel) {
                        channel.pipeline().addLast(counter);
                        if (tls != null) {
                            channel.pipeline().addLast(tls.newHandler(channel.alloc()));
                        }
                        channel.pipeline().addLast(
                                new HttpServerCodec(MAX_INITIAL_LINE, MAX_HEADER_SIZE, MAX_CHUNK_SIZE),
                                new HttpServerExpectContinueHandler());
                        if (tls != null) {
                            // Files go as chunks there: sendfile cannot pass through TLS.
                            channel.pipeline().addLast(new ChunkedWriteHandler());
                        }
                        channel.pipeline().addLast(new HttpHandler(control, docRoot));
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
