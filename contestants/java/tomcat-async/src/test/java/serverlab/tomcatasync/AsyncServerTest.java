package serverlab.tomcatasync;

import serverlab.core.ServerContract;
import serverlab.tomcat.TomcatServer;

/** java-tomcat-async's servlets on a real embedded Tomcat: the shared server contract. */
class AsyncServerTest extends ServerContract {
    private TomcatServer.Running server;

    @Override
    protected int start(String... args) throws Exception {
        server = new TomcatServer("java-tomcat-async", args).start(Main.MODEL);
        return server.port();
    }

    @Override
    protected void stop() throws Exception {
        server.stop();
    }
}
