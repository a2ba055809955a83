package serverlab.tomcatasync;

import serverlab.tomcat.TomcatServer;

/** java-tomcat-async: Tomcat's thread pool serves requests; waiting ones hold no thread. */
public final class Main {
    private Main() {
    }

    public static void main(String[] argv) throws Exception {
        new TomcatServer("java-tomcat-async", argv).run(AsyncPushServlet::new, (connector, args) -> { });
    }
}
