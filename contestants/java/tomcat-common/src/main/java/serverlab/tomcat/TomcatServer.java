package serverlab.tomcat;

import com.google.common.util.concurrent.MoreExecutors;
import jakarta.servlet.Servlet;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.apache.catalina.Context;
import org.apache.catalina.Executor;
import org.apache.catalina.LifecycleException;
import org.apache.catalina.Wrapper;
import org.apache.catalina.connector.Connector;
import org.apache.catalina.core.StandardHost;
import org.apache.catalina.core.StandardThreadExecutor;
import org.apache.catalina.core.StandardVirtualThreadExecutor;
import org.apache.catalina.startup.Tomcat;
import org.apache.catalina.util.ServerInfo;
import org.apache.tomcat.util.descriptor.web.FilterDef;
import org.apache.tomcat.util.descriptor.web.FilterMap;
import org.apache.tomcat.websocket.server.WsSci;
import serverlab.core.Args;
import serverlab.core.ControlApi;
import serverlab.core.DocRoot;
import serverlab.core.Endpoint;
import serverlab.core.ListenAddresses;
import serverlab.core.RequestManager;
import serverlab.core.Stats;

/**
 * Embedded Tomcat as every Tomcat contestant runs it: an NIO connector on 127.0.0.1 (and one
 * on the {@code --host} address when that is another), the same for the TLS port (JSSE, with
 * HTTP/2 by ALPN) and the h2c port when given, one thread pool for all, the shared
 * servlets and WebSocket endpoint, and the {@code /push} and {@code /sse} servlets of the
 * contestant's request-handling model.
 */
public final class TomcatServer {
    /** Kept referenced: java.util.logging forgets a logger's level once the logger is collected. */
    private static final Logger TOMCAT_LOG = Logger.getLogger("org.apache");
    /** Tomcat's own default for a connector's pool: the idle threads kept. */
    private static final int MIN_SPARE_THREADS = 10;

    private final Args args;
    private final ControlApi control;
    /** Every connector's protocol, for the open-connection count of {@code /stats}. */
    private final List<CountingNioProtocol> protocols = new CopyOnWriteArrayList<>();
    private final PriorKnowledgeValve h2cOnly = new PriorKnowledgeValve();

    /** The ports a server listens on, each by its option; the HTTP one always. */
    private enum Listener {
        HTTP("port"), TLS("tls-port"), H2C("h2c-port");

        private final String option;

        Listener(String option) {
            this.option = option;
        }
    }

    /** Builds one of the contestant's servlets from the shared core. */
    @FunctionalInterface
    public interface ServletFactory {
        Servlet create(ControlApi control);
    }

    /** The pool that runs requests on every connector. */
    @FunctionalInterface
    public interface ExecutorFactory {
        Executor create(Args args);
    }

    /**
     * Where grpc-java runs a gRPC call's handlers and listeners (its ServerBuilder's
     * {@code executor}), given the pool that runs requests on every connector.
     */
    @FunctionalInterface
    public interface CallExecutorFactory {
        java.util.concurrent.Executor create(Executor threads);
    }

    /**
     * What differs between the Tomcat contestants: how a push or SSE request waits, the
     * threads, and where gRPC calls run.
     */
    public record Model(ServletFactory push, ServletFactory sse, ExecutorFactory threads, CallExecutorFactory grpcCalls) {
    }

    /** A started server, for tests: its ports (-1 for one not asked for), and a way to stop it. */
    public record Running(Tomcat tomcat, int port, int tlsPort, int h2cPort) {
        public void stop() throws LifecycleException {
            tomcat.stop();
            tomcat.destroy();
        }
    }

    public TomcatServer(String serverName, String[] argv) {
        this.args = new Args(argv);
        Stats stats = new Stats(serverName);
        this.control = new ControlApi(stats, new RequestManager(stats));
    }

    /** The {@code version} line: the JVM that runs it and the library versions. */
    public static String versionLine() {
        return "java " + Runtime.version() + " (" + System.getProperty("java.vm.vendor") + "), tomcat "
                + ServerInfo.getServerNumber() + ", jackson " + com.fasterxml.jackson.databind.cfg.PackageVersion.VERSION
                + ", grpc-servlet-jakarta " + io.grpc.servlet.jakarta.ServletAdapter.class.getPackage().getImplementationVersion();
    }

    /** A pool of platform threads of {@code --threads} at most, like a connector's own. */
    public static Executor platformThreads(Args args) {
        StandardThreadExecutor executor = new StandardThreadExecutor();
        executor.setName("http");
        executor.setNamePrefix("http-exec-");
        executor.setMaxThreads(args.integer("threads", 200));
        executor.setMinSpareThreads(MIN_SPARE_THREADS);
        return executor;
    }

    /** A new virtual thread for every task (Tomcat's {@code useVirtualThreads}). */
    public static Executor virtualThreads(Args args) {
        StandardVirtualThreadExecutor executor = new StandardVirtualThreadExecutor();
        executor.setName("http");
        executor.setNamePrefix("http-virt-");
        return executor;
    }

    /**
     * gRPC calls run on the container thread that read their message (grpc-java's direct
     * executor): no handler of the service blocks, so no hand-off to another pool is needed.
     */
    public static java.util.concurrent.Executor callsInContainerThread(Executor threads) {
        return MoreExecutors.directExecutor();
    }

    /** gRPC calls run on the connectors' own pool, each task on a thread of it. */
    public static java.util.concurrent.Executor callsOnPool(Executor threads) {
        return threads;
    }

    /** Starts Tomcat and blocks until the JVM is told to stop (SIGTERM ends it at once). */
    public void run(Model model) throws IOException, LifecycleException {
        if (args.has("version")) {
            System.out.println(versionLine());
            return;
        }
        start(model).tomcat().getServer().await();
    }

    /**
     * Starts Tomcat on every listen address: the HTTP port, and the TLS and h2c ports when
     * given (spec §12, §14); {@code --port 0} takes a free port, the same on every address.
     */
    public Running start(Model model) throws IOException, LifecycleException {
        TOMCAT_LOG.setLevel(Level.WARNING);
        Tomcat tomcat = new Tomcat();
        tomcat.setBaseDir(baseDir().toString());
        ((StandardHost) tomcat.getHost()).setErrorReportValveClass(JsonErrorReportValve.class.getName());
        tomcat.getHost().setAutoDeploy(false);
        Executor threads = model.threads().create(args);
        tomcat.getService().addExecutor(threads);
        List<String> addresses = ListenAddresses.of(args);
        Map<Listener, Connector> loopback = new EnumMap<>(Listener.class);
        for (Listener listener : listeners()) {
            Connector connector = connector(listener, addresses.get(0), Integer.parseInt(args.required(listener.option)),
                    threads);
            loopback.put(listener, connector);
            tomcat.getService().addConnector(connector);
        }
        tomcat.getEngine().getPipeline().addValve(h2cOnly);
        tomcat.getEngine().getPipeline().addValve(new StatsValve(control));
        tomcat.getEngine().getPipeline().addValve(new FramingValve());
        Context context = tomcat.addContext("", null);
        context.addServletContainerInitializer(new WsSci(), null);
        addServlets(context, model);
        addGrpc(context, model.grpcCalls().create(threads));
        control.counters().openConnectionsFrom(
                () -> protocols.stream().mapToLong(CountingNioProtocol::getConnectionCount).sum());
        // Initialising binds the loopback connectors, so a port of 0 is known before the
        // other addresses bind it; all are bound before start, and so before readiness.
        tomcat.init();
        for (String address : addresses.subList(1, addresses.size())) {
            loopback.forEach((listener, first) ->
                    tomcat.getService().addConnector(connector(listener, address, first.getLocalPort(), threads)));
        }
        tomcat.start();
        return new Running(tomcat, localPort(loopback, Listener.HTTP), localPort(loopback, Listener.TLS),
                localPort(loopback, Listener.H2C));
    }

    private List<Listener> listeners() {
        return Arrays.stream(Listener.values()).filter(listener -> args.has(listener.option)).toList();
    }

    private static int localPort(Map<Listener, Connector> connectors, Listener listener) {
        Connector connector = connectors.get(listener);
        return connector == null ? -1 : connector.getLocalPort();
    }

    private Path baseDir() throws IOException {
        String workdir = args.string("workdir", null);
        return workdir != null ? Path.of(workdir) : Files.createTempDirectory("serverlab-tomcat");
    }

    private Connector connector(Listener listener, String address, int port, Executor threads) {
        Connector connector = new Connector(CountingNioProtocol.class.getName());
        connector.setPort(port);
        connector.setProperty("address", address);
        connector.setProperty("maxConnections", args.string("max-connections", "10000"));
        connector.setProperty("acceptCount", args.string("accept-count", "100"));
        // Spec §8 wants 8 KiB header sections read. Tomcat gives every connection a buffer of
        // this size, so twice the minimum rather than 64 KiB keeps 20,000 connections in the heap.
        connector.setProperty("maxHttpRequestHeaderSize", "16384");
        // Benchmarks keep connections alive; Tomcat's default closes one after 100 requests.
        connector.setProperty("maxKeepAliveRequests", "-1");
        connector.setProperty("server", "serverlab");
        // How long a connection may take to send its request line and headers, and its first
        // byte (Tomcat's connectionTimeout; 60 s, the embedded default, as shipped): shorter
        // frees a thread per request that a slowloris or idle client holds.
        connector.setProperty("connectionTimeout", args.string("connection-timeout-ms", "60000"));
        // A raw backslash in the target: HTTP/2 streams refuse it before the container with a
        // bare 400 (no Content-Type, no body, not counted). Let through the parser, it reaches
        // the adapter, whose 400 goes through the valves and gets the JSON error body, as on
        // HTTP/1.1; the path is still refused, never served.
        connector.setProperty("relaxedPathChars", "\\");
        CountingNioProtocol protocol = (CountingNioProtocol) connector.getProtocolHandler();
        protocol.setExecutor(threads);
        protocol.countInto(control.counters());
        protocols.add(protocol);
        int maxStreams = args.integer("h2-max-streams", SecureProtocols.MAX_STREAMS);
        switch (listener) {
            case TLS -> {
                connector.setSecure(true);
                connector.setScheme("https");
                connector.setProperty("SSLEnabled", "true");
                connector.setProperty("sslImplementationName", SecureProtocols.implementation());
                connector.addSslHostConfig(SecureProtocols.hostConfig(args.required("tls-cert"), args.required("tls-key")));
                connector.addUpgradeProtocol(SecureProtocols.http2(SecureProtocols.runAtOnce(threads), maxStreams));
            }
            case H2C -> {
                connector.addUpgradeProtocol(SecureProtocols.http2(SecureProtocols.runAtOnce(threads), maxStreams));
                h2cOnly.add(connector);
            }
            case HTTP -> {
            }
        }
        return connector;
    }

    private void addServlets(Context context, Model model) throws IOException {
        DocRoot docRoot = new DocRoot(Path.of(args.string("docroot", new File(".").getAbsolutePath())));
        add(context, Endpoint.PERF.path(), new PerfServlet());
        add(context, Endpoint.FILES.path() + "*", new FilesServlet(docRoot));
        add(context, Endpoint.UPLOAD.path(), new UploadServlet());
        add(context, Endpoint.TIMESTAMP.path(),
                ControlServlet.reading(Endpoint.TIMESTAMP, request -> control.timestamp(request.getParameter("client"))));
        add(context, Endpoint.STATS.path(), ControlServlet.reading(Endpoint.STATS, request -> control.stats()));
        add(context, Endpoint.LOGGING.path(), ControlServlet.posting(Endpoint.LOGGING, control::logging));
        add(context, Endpoint.EVENT_SET.path(), ControlServlet.posting(Endpoint.EVENT_SET, control::eventSet));
        add(context, Endpoint.EVENT_CLEAR.path(), ControlServlet.posting(Endpoint.EVENT_CLEAR, control::eventClear));
        add(context, Endpoint.PUSH.path(), model.push().create(control));
        add(context, Endpoint.SSE.path(), model.sse().create(control));
        add(context, Endpoint.WEBSOCKET.path(), new WebSocketServlet(control));
        add(context, "/", new NotFoundServlet());
    }

    /** Spec §16: gRPC calls, on the h2c port and the TLS port's h2, ahead of every servlet. */
    private void addGrpc(Context context, java.util.concurrent.Executor calls) {
        FilterDef filter = new FilterDef();
        filter.setFilterName("grpc");
        filter.setFilter(new GrpcFilter(control, calls));
        filter.setAsyncSupported("true");
        context.addFilterDef(filter);
        FilterMap everyPath = new FilterMap();
        everyPath.setFilterName("grpc");
        everyPath.addURLPatternDecoded("/*");
        context.addFilterMap(everyPath);
    }

    private static void add(Context context, String pattern, Servlet servlet) {
        String name = servlet.getClass().getSimpleName() + pattern;
        Wrapper wrapper = Tomcat.addServlet(context, name, servlet);
        wrapper.setAsyncSupported(true);
        context.addServletMappingDecoded(pattern, name);
    }
}
