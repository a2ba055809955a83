package serverlab.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.nio.file.Files;
import org.junit.jupiter.api.Test;
import serverlab.core.Args;
import serverlab.core.H2Wire;
import serverlab.core.UnfinishedHead;

/**
 * java-netty's hardening tunables (suites/abuse.toml's hardened runs) on real event loops:
 * a request head never finished is cut off at header_timeout_ms, the h2c port's SETTINGS
 * announce h2_max_streams, and a client resetting more than h2_max_resets streams in the
 * window is sent GOAWAY ENHANCE_YOUR_CALM.
 */
class HardeningTest {
    private static Main.Running start(int h2cPort, String... extra) throws Exception {
        String docroot = Files.createTempDirectory("serverlab-hardening").toString();
        String[] args = java.util.stream.Stream.concat(java.util.stream.Stream.of("--port", "0",
                "--h2c-port", Integer.toString(h2cPort), "--docroot", docroot),
                java.util.Arrays.stream(extra)).toArray(String[]::new);
        return Main.start(new Args(args));
    }

    @Test
    void aRequestHeadNeverFinishedIsCutOffAtTheHeaderTimeout() throws Exception {
        Main.Running server = start(H2Wire.freePort(), "--header-timeout-ms", "1000");
        try {
            UnfinishedHead.awaitClose(server.port());
        } finally {
            server.stop();
        }
    }

    @Test
    void theSettingsAnnounceTheStreamLimitAndResetsPastTheirLimitEndTheConnection() throws Exception {
        int port = H2Wire.freePort();
        Main.Running server = start(port, "--h2-max-streams", "100", "--h2-max-resets", "5");
        try (H2Wire wire = new H2Wire(port)) {
            assertEquals(100, wire.next(H2Wire.SETTINGS).setting(H2Wire.SETTINGS_MAX_CONCURRENT_STREAMS));
            for (int stream = 1; stream <= 2 * 10 - 1; stream += 2) {
                wire.getAndReset(stream);
            }
            H2Wire.Frame goaway = wire.next(H2Wire.GOAWAY);
            assertNotNull(goaway, "the server closed without a GOAWAY");
            assertEquals(H2Wire.ENHANCE_YOUR_CALM, goaway.errorCode());
        } finally {
            server.stop();
        }
    }

    @Test
    void asShippedTheSettingsAnnounce250Streams() throws Exception {
        int port = H2Wire.freePort();
        Main.Running server = start(port);
        try (H2Wire wire = new H2Wire(port)) {
            assertEquals(Pipelines.H2_STREAMS, wire.next(H2Wire.SETTINGS).setting(H2Wire.SETTINGS_MAX_CONCURRENT_STREAMS));
        } finally {
            server.stop();
        }
    }
}
