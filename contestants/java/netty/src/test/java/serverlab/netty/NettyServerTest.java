package serverlab.netty;

import serverlab.core.Args;
import serverlab.core.ServerContract;

/** java-netty on real event loops: the shared server contract. */
class NettyServerTest extends ServerContract {
    private Main.Running server;

    @Override
    protected int start(String... args) throws Exception {
        server = Main.start(new Args(args));
        return server.port();
    }

    @Override
    protected void stop() {
        server.stop();
    }
}
