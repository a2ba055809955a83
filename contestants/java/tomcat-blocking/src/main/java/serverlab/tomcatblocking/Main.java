package serverlab.tomcatblocking;

import serverlab.tomcat.TomcatServer;

/** java-tomcat-blocking: Tomcat's platform-thread pool, one thread held per waiting request. */
public final class Main {
    /** The blocking push and SSE servlets on a pool of platform threads. */
    public static final TomcatServer.Model MODEL = new TomcatServer.Model(BlockingPushServlet::new,
            BlockingSseServlet::new, TomcatServer::platformThreads, TomcatServer::callsOnPool);

    private Main() {
    }

    public static void main(String[] argv) throws Exception {
        new TomcatServer("java-tomcat-blocking", argv).run(MODEL);
    }
}
