package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * A slowloris client's first line and header, never finished, for the header-timeout tests:
 * the server's hardening must close the connection on its own.
 */
public final class UnfinishedHead {
    private UnfinishedHead() {}

    /** Sends an unfinished request head to 127.0.0.1:port; returns once the server closed. */
    public static void awaitClose(int port) throws IOException {
        try (Socket socket = new Socket("127.0.0.1", port)) {
            // A generous bound: the server's close, not this timeout, ends the read.
            socket.setSoTimeout(30_000);
            socket.getOutputStream().write("GET /perf HTTP/1.1\r\nHost: x\r\n".getBytes(StandardCharsets.US_ASCII));
            InputStream in = socket.getInputStream();
            in.readAllBytes(); // returns at the server's close
            assertEquals(-1, in.read());
        }
    }
}
