package serverlab.tomcat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.List;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import serverlab.core.Perf;

/**
 * The TLS and h2c ports every Tomcat contestant shares (spec §12-§14), on a real embedded
 * Tomcat with a throwaway certificate made by {@code openssl}, as the lab makes one. The push
 * and SSE servlets, which differ between the contestants, play no part here.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SecurePortsTest {
    private static final TomcatServer.Model MODEL = new TomcatServer.Model(control -> new NotFoundServlet(),
            control -> new NotFoundServlet(), TomcatServer::platformThreads, TomcatServer::callsInContainerThread);
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final byte[] PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
    private static final int SETTINGS = 0x4;

    private TomcatServer.Running server;
    private SSLContext trusting;

    @BeforeAll
    void startServer() throws Exception {
        Path folder = Files.createTempDirectory("serverlab-tls");
        Path cert = folder.resolve("cert.pem");
        Path key = folder.resolve("key.pem");
        Process openssl = new ProcessBuilder("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:P-256", "-nodes", "-keyout", key.toString(), "-out", cert.toString(), "-days", "1",
                "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,IP:127.0.0.2")
                .redirectErrorStream(true).start();
        openssl.getInputStream().readAllBytes();
        assertEquals(0, openssl.waitFor(), "openssl made no certificate");
        trusting = trusting(cert);
        server = new TomcatServer("secure-ports", new String[] {"--port", "0", "--host", "127.0.0.2",
                "--docroot", folder.toString(), "--tls-port", "0", "--tls-cert", cert.toString(),
                "--tls-key", key.toString(), "--h2c-port", "0"}).start(MODEL);
    }

    @AfterAll
    void stopServer() throws Exception {
        server.stop();
    }

    @Test
    void theTlsPortServesHttp2ByAlpnOnBothAddresses() throws Exception {
        HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_2).sslContext(trusting)
                .connectTimeout(WAIT).build();
        for (String address : List.of("127.0.0.1", "127.0.0.2")) {
            HttpRequest request = HttpRequest.newBuilder(URI.create("https://" + address + ":" + server.tlsPort()
                    + "/perf")).timeout(WAIT).build();
            HttpResponse<byte[]> perf = client.send(request, HttpResponse.BodyHandlers.ofByteArray());
            assertEquals(HttpClient.Version.HTTP_2, perf.version(), address);
            assertArrayEquals(Perf.body(), perf.body(), address);
        }
    }

    @Test
    void alpnChoosesHttp11ForAClientThatOffersOnlyThat() throws Exception {
        try (SSLSocket socket = tlsSocket(List.of("http/1.1"), null)) {
            socket.startHandshake();
            assertEquals("http/1.1", socket.getApplicationProtocol());
        }
    }

    @Test
    void aClientOfferingOnlyCbcSuitesIsRefused() throws Exception {
        try (SSLSocket socket = tlsSocket(List.of(), "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256")) {
            socket.setEnabledProtocols(new String[] {"TLSv1.2"});
            assertThrows(SSLHandshakeException.class, socket::startHandshake);
        }
    }

    @Test
    void theH2cPortAnswersAPrefaceWithSettings() throws Exception {
        try (Socket socket = new Socket("127.0.0.1", server.h2cPort())) {
            socket.setSoTimeout((int) WAIT.toMillis());
            OutputStream out = socket.getOutputStream();
            out.write(PREFACE);
            out.write(new byte[] {0, 0, 0, SETTINGS, 0, 0, 0, 0, 0}); // an empty SETTINGS frame
            out.flush();
            byte[] header = socket.getInputStream().readNBytes(9);
            assertEquals(SETTINGS, header[3], "the server's first frame");
        }
    }

    @Test
    void theH2cPortClosesAnHttp11RequestUnanswered() throws Exception {
        try (Socket socket = new Socket("127.0.0.1", server.h2cPort())) {
            socket.setSoTimeout((int) WAIT.toMillis());
            socket.getOutputStream().write("GET /perf HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII));
            InputStream in = socket.getInputStream();
            assertEquals("", new String(in.readAllBytes(), StandardCharsets.ISO_8859_1));
        }
    }

    private SSLSocket tlsSocket(List<String> alpn, String onlySuite) throws Exception {
        SSLSocket socket = (SSLSocket) trusting.getSocketFactory().createSocket("127.0.0.1", server.tlsPort());
        socket.setSoTimeout((int) WAIT.toMillis());
        SSLParameters parameters = socket.getSSLParameters();
        parameters.setApplicationProtocols(alpn.toArray(String[]::new));
        if (onlySuite != null) {
            parameters.setCipherSuites(new String[] {onlySuite});
        }
        socket.setSSLParameters(parameters);
        return socket;
    }

    private static SSLContext trusting(Path cert) throws Exception {
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        try (InputStream in = Files.newInputStream(cert)) {
            store.setCertificateEntry("lab", CertificateFactory.getInstance("X.509").generateCertificate(in));
        }
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(store);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, trust.getTrustManagers(), null);
        return context;
    }
}
