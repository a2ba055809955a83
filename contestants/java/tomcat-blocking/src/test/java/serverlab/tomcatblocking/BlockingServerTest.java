package serverlab.tomcatblocking;

import serverlab.core.ServerContract;
import serverlab.tomcat.TomcatServer;

/** java-tomcat-blocking's servlets on a real embedded Tomcat: the shared server contract. */
class BlockingServerTest extends ServerContract {
    private TomcatServer.Running server;

    @Override
    protected int start(String... args) throws Exception {
        server = new TomcatServer("java-tomcat-blocking", args).start(Main.MODEL);
        return server.port();
    }

    @Override
    protected void stop() throws Exception {
        server.stop();
    }
}
