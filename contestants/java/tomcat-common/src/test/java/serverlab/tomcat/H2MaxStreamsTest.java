package serverlab.tomcat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import org.junit.jupiter.api.Test;
import serverlab.core.H2Wire;

/**
 * The h2_max_streams tunable (suites/abuse.toml's hardened runs): the SETTINGS a real
 * embedded Tomcat sends on its h2c port announce it as SETTINGS_MAX_CONCURRENT_STREAMS, and
 * the shipped 250 without it.
 */
class H2MaxStreamsTest {
    private static final TomcatServer.Model MODEL = new TomcatServer.Model(control -> new NotFoundServlet(),
            control -> new NotFoundServlet(), TomcatServer::platformThreads, TomcatServer::callsInContainerThread);

    @Test
    void theServersSettingsAnnounceTheStreamLimitItWasGiven() throws Exception {
        assertEquals(100, announced("--h2-max-streams", "100"));
        assertEquals(SecureProtocols.MAX_STREAMS, announced());
    }

    private static long announced(String... extra) throws Exception {
        String docroot = Files.createTempDirectory("serverlab-h2streams").toString();
        String[] args = java.util.stream.Stream.concat(
                java.util.stream.Stream.of("--port", "0", "--h2c-port", "0", "--docroot", docroot),
                java.util.Arrays.stream(extra)).toArray(String[]::new);
        TomcatServer.Running server = new TomcatServer("h2-max-streams", args).start(MODEL);
        try (H2Wire wire = new H2Wire(server.h2cPort())) {
            H2Wire.Frame settings = wire.next(H2Wire.SETTINGS);
            return settings.setting(H2Wire.SETTINGS_MAX_CONCURRENT_STREAMS);
        } finally {
            server.stop();
        }
    }
}
