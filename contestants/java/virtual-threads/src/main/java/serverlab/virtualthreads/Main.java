package serverlab.virtualthreads;

import serverlab.tomcat.TomcatServer;
import serverlab.tomcatblocking.BlockingPushServlet;

/**
 * java-virtual-threads: the very servlet of java-tomcat-blocking, but Tomcat runs each request
 * on a new virtual thread instead of a pooled platform thread, so a waiting long poll parks a
 * cheap virtual thread. The one variable changed is the thread kind.
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] argv) throws Exception {
        if (Runtime.version().feature() < 21) {
            throw new IllegalStateException("virtual threads need Java 21 or newer, this is " + Runtime.version());
        }
        new TomcatServer("java-virtual-threads", argv).run(BlockingPushServlet::new,
                (connector, args) -> connector.setProperty("useVirtualThreads", "true"));
    }
}
