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
import io.netty.util.Version;
import java.nio.file.Path;
import serverlab.core.Args;
import serverlab.core.ControlApi;
import serverlab.core.DocRoot;
import serverlab.core.RequestManager;
import serverlab.core.Stats;

/**
 * java-netty: Netty NIO event loops, one per core, for HTTP and the syslog listener. (The native
 * epoll transport's Linux jars are not served by the registry this project builds from.)
 */
public final class Main {
    private static final int MAX_INITIAL_LINE = 16 * 1024;
    /** Spec §8: header sections up to 64 KiB are read; larger ones get 431. */
    private static final int MAX_HEADER_SIZE = 64 * 1024;
    private static final int MAX_CHUNK_SIZE = 64 * 1024;

    private Main() {
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        if (args.has("version")) {
            System.out.println("java " + Runtime.version() + " (" + System.getProperty("java.vm.vendor") + "), netty "
                    + Version.identify().get("netty-common").artifactVersion() + " (nio), jackson " + com.fasterxml.jackson.databind.cfg.PackageVersion.VERSION);
            return;
        }
        Stats stats = new Stats("java-netty");
        ControlApi control = new ControlApi(stats, new RequestManager(stats));
        DocRoot docRoot = new DocRoot(Path.of(args.string("docroot", ".")));
        int loops = args.integer("threads", 0);
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup workers = new NioEventLoopGroup(loops > 0 ? loops : Runtime.getRuntime().availableProcessors());
        // Syslog first: readiness is judged on the HTTP port, so it must open last.
        if (args.has("syslog-port")) {
            Syslog.listen(boss, workers, Integer.parseInt(args.required("syslog-port")), stats);
        }
        Channel http = new ServerBootstrap().group(boss, workers).channel(NioServerSocketChannel.class)
                .option(ChannelOption.SO_BACKLOG, args.integer("backlog", 1024))
                .childOption(ChannelOption.TCP_NODELAY, true)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel channel) {
                        channel.pipeline().addLast(
                                new HttpServerCodec(MAX_INITIAL_LINE, MAX_HEADER_SIZE, MAX_CHUNK_SIZE),
                                new HttpServerExpectContinueHandler(),
                                new HttpHandler(control, docRoot));
                    }
                })
                .bind("127.0.0.1", Integer.parseInt(args.required("port"))).sync().channel();
        http.closeFuture().sync();
    }
}
