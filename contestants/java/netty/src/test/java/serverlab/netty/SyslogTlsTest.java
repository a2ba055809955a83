package serverlab.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;
import serverlab.core.Args;

/**
 * Syslog over TLS (spec §15, RFC 5425) and parse mode (spec §7.1) on a real java-netty, with
 * a real TLS client: the JDK's own SSLSocket, trusting only the certificate made for the test.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SyslogTlsTest {
    private static final String CERT_ALIAS = "lab";
    private static final long WAIT_MS = 10_000;

    private Path dir;
    private KeyStore keys;
    private Main.Running server;
    private final HttpClient http = HttpClient.newHttpClient();

    @BeforeAll
    void startServer(@TempDir Path tempDir) throws Exception {
        dir = tempDir;
        keys = makeKeyMaterial(dir);
        server = Main.start(new Args(new String[] {"--port", "0", "--docroot", dir.toString(),
                "--syslog-tls-port", "0", "--tls-cert", dir.resolve("cert.pem").toString(),
                "--tls-key", dir.resolve("key.pem").toString(), "--syslog-mode", "parse"}));
    }

    @AfterAll
    void stopServer() {
        server.stop();
    }

    /**
     * An ECDSA P-256 certificate for 127.0.0.1 and its PKCS#8 key, PEM files as the lab hands
     * them over, made by the openssl command (keytool takes seconds for the same); returns a
     * trust store holding only that certificate.
     */
    private static KeyStore makeKeyMaterial(Path dir) throws Exception {
        Process openssl = new ProcessBuilder("openssl", "req", "-x509", "-newkey", "ec",
                "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", dir.resolve("key.pem").toString(),
                "-out", dir.resolve("cert.pem").toString(), "-subj", "/CN=localhost",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-days", "2")
                .redirectErrorStream(true).start();
        String output = new String(openssl.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(openssl.waitFor(60, TimeUnit.SECONDS) && openssl.exitValue() == 0, output);
        KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
        trusted.load(null, null);
        try (InputStream in = Files.newInputStream(dir.resolve("cert.pem"))) {
            trusted.setCertificateEntry(CERT_ALIAS, CertificateFactory.getInstance("X.509").generateCertificate(in));
        }
        return trusted;
    }

    private SSLSocket tlsClient(String protocol) throws Exception {
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(keys);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, trust.getTrustManagers(), null);
        SSLSocket socket = (SSLSocket) context.getSocketFactory().createSocket("127.0.0.1", server.syslogTlsPort());
        socket.setEnabledProtocols(new String[] {protocol});
        socket.setSoTimeout((int) WAIT_MS);
        socket.startHandshake();
        return socket;
    }

    private JsonNode syslogStats() throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/stats")).build();
        return new ObjectMapper().readTree(http.send(request, HttpResponse.BodyHandlers.ofString()).body()).get("syslog");
    }

    /** Waits until {@code received} reaches {@code count}; returns the syslog counters then. */
    private JsonNode awaitReceived(long count) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        JsonNode syslog = syslogStats();
        while (syslog.get("received").asLong() < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
            syslog = syslogStats();
        }
        return syslog;
    }

    private static byte[] octetCounted(List<String> messages) {
        StringBuilder wire = new StringBuilder();
        for (String message : messages) {
            wire.append(message.getBytes(StandardCharsets.UTF_8).length).append(' ').append(message);
        }
        return wire.toString().getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void octetCountedFramesOverTls13AndTls12AreCountedAndParsed() throws Exception {
        long before = syslogStats().get("received").asLong();
        long parsedBefore = syslogStats().get("parsed").asLong();
        long malformedBefore = syslogStats().get("malformed").asLong();
        byte[] wire = octetCounted(List.of("<14>1 2026-11-25T20:00:00Z host app - - [a@1 b=\"c\"] h\u00e9llo",
                "<34>Oct 11 22:14:15 mymachine su: two", "<14>1 - host"));
        for (String protocol : List.of("TLSv1.3", "TLSv1.2")) {
            try (SSLSocket socket = tlsClient(protocol)) {
                assertEquals(protocol, socket.getSession().getProtocol());
                OutputStream out = socket.getOutputStream();
                // A frame split across TLS records is still one message.
                out.write(wire, 0, 7);
                out.flush();
                out.write(wire, 7, wire.length - 7);
                out.flush();
                awaitReceived(before + 3);
            }
            before += 3;
        }
        JsonNode syslog = awaitReceived(before);
        assertEquals("parse", syslog.get("mode").asText());
        assertEquals(before, syslog.get("received").asLong());
        assertEquals(parsedBefore + 4, syslog.get("parsed").asLong());
        assertEquals(malformedBefore + 2, syslog.get("malformed").asLong());
    }

    @Test
    void theCertificateServedIsTheOneGiven() throws Exception {
        try (SSLSocket socket = tlsClient("TLSv1.3")) {
            assertEquals(keys.getCertificate(CERT_ALIAS), socket.getSession().getPeerCertificates()[0]);
        }
    }

    @Test
    void plaintextSyslogOnTheTlsPortIsNotCountedAndIsClosed() throws Exception {
        long before = syslogStats().get("received").asLong();
        try (Socket plain = new Socket("127.0.0.1", server.syslogTlsPort())) {
            plain.setSoTimeout(2_000);
            plain.getOutputStream().write(octetCounted(List.of("<14>1 - host app - - - plain")));
            plain.getOutputStream().write("<14>1 - host app - - - plain\n".getBytes(StandardCharsets.US_ASCII));
            assertClosedByServer(plain.getInputStream());
        }
        // A TLS connection after it still works, and nothing of the plaintext was counted.
        try (SSLSocket socket = tlsClient("TLSv1.3")) {
            socket.getOutputStream().write(octetCounted(List.of("<14>1 - host app - - - after")));
            socket.getOutputStream().flush();
            assertEquals(before + 1, awaitReceived(before + 1).get("received").asLong());
        }
    }

    /** The server closes within the socket's timeout, after at most an alert. */
    private static void assertClosedByServer(InputStream in) throws IOException {
        byte[] buffer = new byte[1024];
        try {
            while (in.read(buffer) >= 0) {
                // An alert record may come first.
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("the server kept the plaintext connection open", e);
        } catch (IOException e) {
            // A reset is a close too.
        }
    }

    @Test
    void aBadMsgLenCountsTheFramesBeforeItAndEndsWithCloseNotify() throws Exception {
        long before = syslogStats().get("received").asLong();
        try (SSLSocket socket = tlsClient("TLSv1.3")) {
            byte[] good = octetCounted(List.of("<14>1 - host app - - - one", "<14>1 - host app - - - two"));
            socket.getOutputStream().write(good);
            // A leading zero: RFC 5425 has no way to find the next frame, so the good one after it is lost.
            socket.getOutputStream().write("05 <14>x".getBytes(StandardCharsets.US_ASCII));
            socket.getOutputStream().write(octetCounted(List.of("<14>1 - host app - - - three")));
            socket.getOutputStream().flush();
            // close_notify makes the JDK's read end with -1; a bare TCP close would throw.
            assertEquals(-1, socket.getInputStream().read());
        }
        assertEquals(before + 2, awaitReceived(before + 2).get("received").asLong());
    }

    @Test
    void theClientsCloseNotifyIsAnsweredWithTheServersAfterItsMessagesAreCounted() throws Exception {
        long before = syslogStats().get("received").asLong();
        try (SSLSocket socket = tlsClient("TLSv1.3")) {
            socket.getOutputStream().write(octetCounted(List.of("<14>1 - host app - - - last")));
            socket.getOutputStream().flush();
            socket.shutdownOutput();
            assertEquals(-1, socket.getInputStream().read());
        }
        assertEquals(before + 1, awaitReceived(before + 1).get("received").asLong());
    }
}
