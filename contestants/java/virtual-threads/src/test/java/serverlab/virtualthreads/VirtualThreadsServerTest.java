package serverlab.virtualthreads;

import serverlab.core.ServerContract;
import serverlab.tomcat.TomcatServer;

/** java-virtual-threads's servlets on a real embedded Tomcat: the shared server contract. */
class VirtualThreadsServerTest extends ServerContract {
    private TomcatServer.Running server;

    @Override
    protected int start(String... args) throws Exception {
        server = new TomcatServer("java-virtual-threads", args).start(Main.MODEL);
        return server.port();
    }

    @Override
    protected void stop() throws Exception {
        server.stop();
    }
}
