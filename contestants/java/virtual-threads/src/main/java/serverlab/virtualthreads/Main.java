package serverlab.virtualthreads;

import serverlab.tomcat.TomcatServer;
import serverlab.tomcatblocking.BlockingPushServlet;
import serverlab.tomcatblocking.BlockingSseServlet;

/**
 * java-virtual-threads: the very servlets of java-tomcat-blocking, but Tomcat runs each request
 * on a new virtual thread instead of a pooled platform thread, so a waiting long poll or SSE
 * stream parks a cheap virtual thread. The one variable changed is the thread kind.
 */
public final class Main {
    /** The blocking push and SSE servlets on a new virtual thread per task. */
    public static final TomcatServer.Model MODEL = new TomcatServer.Model(BlockingPushServlet::new,
            BlockingSseServlet::new, TomcatServer::virtualThreads, TomcatServer::callsOnPool);

    private Main() {
    }

    public static void main(String[] argv) throws Exception {
        if (Runtime.version().feature() < 21) {
            throw new IllegalStateException("virtual threads need Java 21 or newer, this is " + Runtime.version());
        }
        new TomcatServer("java-virtual-threads", argv).run(MODEL);
    }
}
