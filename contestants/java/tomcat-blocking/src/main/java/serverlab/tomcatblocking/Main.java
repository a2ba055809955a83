package serverlab.tomcatblocking;

import serverlab.tomcat.TomcatServer;

/** java-tomcat-blocking: Tomcat's platform-thread pool, one thread held per waiting request. */
public final class Main {
    private Main() {
    }

    public static void main(String[] argv) throws Exception {
        new TomcatServer("java-tomcat-blocking", argv).run(BlockingPushServlet::new, (connector, args) -> { });
    }
}
