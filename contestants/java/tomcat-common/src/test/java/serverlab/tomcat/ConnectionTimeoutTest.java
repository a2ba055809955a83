package serverlab.tomcat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import org.junit.jupiter.api.Test;

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
        try (Socket socket = new Socket("127.0.0.1", server.port())) {
            // A generous bound: the server's close, not this timeout, ends the read.
            socket.setSoTimeout(30_000);
            socket.getOutputStream().write("GET /perf HTTP/1.1\r\nHost: x\r\n".getBytes(StandardCharsets.US_ASCII));
            InputStream in = socket.getInputStream();
            in.readAllBytes(); // returns at the server's close
            assertEquals(-1, in.read());
        } finally {
            server.stop();
        }
    }
}
