package serverlab.tomcatasync;

import serverlab.tomcat.TomcatServer;

/** java-tomcat-async: Tomcat's thread pool serves requests; waiting ones hold no thread. */
public final class Main {
    /** The async push and SSE servlets on a pool of platform threads. */
    public static final TomcatServer.Model MODEL = new TomcatServer.Model(AsyncPushServlet::new,
            AsyncSseServlet::new, TomcatServer::platformThreads, TomcatServer::callsInContainerThread);

    private Main() {
    }

    public static void main(String[] argv) throws Exception {
        new TomcatServer("java-tomcat-async", argv).run(MODEL);
    }
}
