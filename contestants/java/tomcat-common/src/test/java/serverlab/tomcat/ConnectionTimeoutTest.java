package serverlab.tomcat;

import java.nio.file.Files;
import org.junit.jupiter.api.Test;
import serverlab.core.UnfinishedHead;

/**
 * The connection_timeout_ms tunable (suites/abuse.toml's hardened runs): a request header
 * never finished, a slowloris client's, is cut off at Tomcat's connectionTimeout on a real
 * embedded Tomcat, and the thread or connection it held is free again.
 */
class ConnectionTimeoutTest {
    private static final TomcatServer.Model MODEL = new TomcatServer.Model(control -> new NotFoundServlet(),
            control -> new NotFoundServlet(), TomcatServer::platformThreads, TomcatServer::callsInContainerThread);

    @Test
    void aHeaderNeverFinishedIsCutOffAtTheConnectionTimeout() throws Exception {
        String docroot = Files.createTempDirectory("serverlab-timeout").toString();
        TomcatServer.Running server = new TomcatServer("connection-timeout", new String[] {"--port", "0",
                "--docroot", docroot, "--connection-timeout-ms", "1000"}).start(MODEL);
        try {
            UnfinishedHead.awaitClose(server.port());
        } finally {
            server.stop();
        }
    }
}
