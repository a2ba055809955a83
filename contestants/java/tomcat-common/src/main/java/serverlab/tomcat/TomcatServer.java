package serverlab.tomcat;

import jakarta.servlet.Servlet;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.apache.catalina.Context;
import org.apache.catalina.LifecycleException;
import org.apache.catalina.Wrapper;
import org.apache.catalina.connector.Connector;
import org.apache.catalina.core.StandardHost;
import org.apache.catalina.startup.Tomcat;
import org.apache.catalina.util.ServerInfo;
import serverlab.core.Args;
import serverlab.core.ControlApi;
import serverlab.core.DocRoot;
import serverlab.core.Endpoint;
import serverlab.core.RequestManager;
import serverlab.core.Stats;

/**
 * Embedded Tomcat as every Tomcat contestant runs it: one NIO connector on 127.0.0.1, the
 * shared servlets, and the {@code /push} servlet of the contestant's request-handling model.
 */
public final class TomcatServer {
    /** Kept referenced: java.util.logging forgets a logger's level once the logger is collected. */
    private static final Logger TOMCAT_LOG = Logger.getLogger("org.apache");

    private final Args args;
    private final ControlApi control;

    /** Builds the contestant's push servlet from the shared core. */
    @FunctionalInterface
    public interface PushServletFactory {
        Servlet create(ControlApi control);
    }

    /** A contestant's tuning of the connector beyond the shared tunables. */
    @FunctionalInterface
    public interface ConnectorTuning {
        void apply(Connector connector, Args args);
    }

    public TomcatServer(String serverName, String[] argv) {
        this.args = new Args(argv);
        Stats stats = new Stats(serverName);
        this.control = new ControlApi(stats, new RequestManager(stats));
    }

    /** The {@code version} line: the JVM that runs it and the library versions. */
    public static String versionLine() {
        return "java " + Runtime.version() + " (" + System.getProperty("java.vm.vendor") + "), tomcat "
                + ServerInfo.getServerNumber() + ", jackson " + com.fasterxml.jackson.databind.cfg.PackageVersion.VERSION;
    }

    /** Starts Tomcat and blocks until the JVM is told to stop (SIGTERM ends it at once). */
    public void run(PushServletFactory push, ConnectorTuning tuning) throws IOException, LifecycleException {
        if (args.has("version")) {
            System.out.println(versionLine());
            return;
        }
        TOMCAT_LOG.setLevel(Level.WARNING);
        Tomcat tomcat = new Tomcat();
        tomcat.setBaseDir(baseDir().toString());
        ((StandardHost) tomcat.getHost()).setErrorReportValveClass(JsonErrorReportValve.class.getName());
        tomcat.getHost().setAutoDeploy(false);
        tomcat.setConnector(connector(tuning));
        tomcat.getEngine().getPipeline().addValve(new StatsValve(control));
        tomcat.getEngine().getPipeline().addValve(new FramingValve());
        Context context = tomcat.addContext("", null);
        addServlets(context, push.create(control));
        tomcat.start();
        tomcat.getServer().await();
    }

    private Path baseDir() throws IOException {
        String workdir = args.string("workdir", null);
        return workdir != null ? Path.of(workdir) : Files.createTempDirectory("serverlab-tomcat");
    }

    private Connector connector(ConnectorTuning tuning) {
        Connector connector = new Connector(CountingNioProtocol.class.getName());
        connector.setPort(Integer.parseInt(args.required("port")));
        connector.setProperty("address", "127.0.0.1");
        connector.setProperty("maxThreads", args.string("threads", "200"));
        connector.setProperty("maxConnections", args.string("max-connections", "10000"));
        connector.setProperty("acceptCount", args.string("accept-count", "100"));
        // Spec §8 wants 8 KiB header sections read. Tomcat gives every connection a buffer of
        // this size, so twice the minimum rather than 64 KiB keeps 20,000 connections in the heap.
        connector.setProperty("maxHttpRequestHeaderSize", "16384");
        // Benchmarks keep connections alive; Tomcat's default closes one after 100 requests.
        connector.setProperty("maxKeepAliveRequests", "-1");
        connector.setProperty("server", "serverlab");
        ((CountingNioProtocol) connector.getProtocolHandler()).countInto(control.counters());
        tuning.apply(connector, args);
        return connector;
    }

    private void addServlets(Context context, Servlet push) throws IOException {
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
        add(context, Endpoint.PUSH.path(), push);
        add(context, "/", new NotFoundServlet());
    }

    private static void add(Context context, String pattern, Servlet servlet) {
        String name = servlet.getClass().getSimpleName() + pattern;
        Wrapper wrapper = Tomcat.addServlet(context, name, servlet);
        wrapper.setAsyncSupported(true);
        context.addServletMappingDecoded(pattern, name);
    }
}
