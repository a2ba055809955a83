package serverlab.tomcat;

import serverlab.core.ServerContract;

/** The server contract on a real embedded Tomcat, for the model of one Tomcat contestant. */
public abstract class TomcatContract extends ServerContract {
    private final String name;
    private final TomcatServer.Model model;
    private TomcatServer.Running server;

    protected TomcatContract(String name, TomcatServer.Model model) {
        this.name = name;
        this.model = model;
    }

    @Override
    protected int start(String... args) throws Exception {
        server = new TomcatServer(name, args).start(model);
        return server.port();
    }

    @Override
    protected void stop() throws Exception {
        server.stop();
    }
}
