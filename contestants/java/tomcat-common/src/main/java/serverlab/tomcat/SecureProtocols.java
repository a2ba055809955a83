package serverlab.tomcat;

import org.apache.catalina.Executor;
import org.apache.catalina.core.StandardThreadExecutor;
import org.apache.coyote.http2.Http2Protocol;
import org.apache.tomcat.util.net.SSLHostConfig;
import org.apache.tomcat.util.net.SSLHostConfigCertificate;
import org.apache.tomcat.util.net.jsse.JSSEImplementation;
import serverlab.core.AeadSuites;

/**
 * Spec §12-§14 on Tomcat: the TLS port's JSSE set-up (the JDK's SSLEngine, TLS 1.2 and 1.3,
 * AEAD suites only, the PEM files the lab made) and the {@link Http2Protocol} that the TLS
 * port offers by ALPN and the h2c port speaks from the client's preface on.
 */
final class SecureProtocols {
    /**
     * Streams a client may open at once as shipped: spec §13 asks 100 to 1000; java-netty's
     * figure. The h2_max_streams tunable sets another (suites/abuse.toml's hardened runs).
     */
    static final int MAX_STREAMS = 250;

    private SecureProtocols() {
    }

    /** JSSE, not Tomcat's OpenSSL binding, which an embedded Tomcat uses only when tcnative loads. */
    static String implementation() {
        return JSSEImplementation.class.getName();
    }

    /** The default host's TLS set-up: the certificate and key given, TLS 1.2 and 1.3, AEAD only. */
    static SSLHostConfig hostConfig(String certFile, String keyFile) {
        SSLHostConfig host = new SSLHostConfig();
        host.setProtocols("+TLSv1.2+TLSv1.3");
        host.setCiphers(String.join(",", AeadSuites.TLS12));
        host.setCipherSuites(String.join(":", AeadSuites.TLS13));
        SSLHostConfigCertificate certificate =
                new SSLHostConfigCertificate(host, SSLHostConfigCertificate.Type.UNDEFINED);
        certificate.setCertificateFile(certFile);
        certificate.setCertificateKeyFile(keyFile);
        host.addCertificate(certificate);
        return host;
    }

    /**
     * HTTP/2 for one connector (each needs its own instance), running at most
     * {@code runAtOnce} of a connection's streams on threads at the same time, and letting a
     * client open {@code maxStreams} at once (SETTINGS_MAX_CONCURRENT_STREAMS).
     */
    static Http2Protocol http2(int runAtOnce, int maxStreams) {
        Http2Protocol http2 = new Http2Protocol();
        http2.setMaxConcurrentStreams(maxStreams);
        http2.setMaxConcurrentStreamExecution(runAtOnce);
        // Spec §13: a header block split over CONTINUATION frames is served, however small
        // its pieces (RFC 9113 §6.10). gRPC (§16) sends each message in a DATA frame of its
        // own, often of a few bytes and not the stream's last (every Chat message; a unary
        // request's message whenever its END_STREAM follows in an empty frame of its own), and
        // gRPC clients return a received message's bytes to the window at once, in
        // WINDOW_UPDATEs as small (grpcio sends one of a few bytes on its first call). Tomcat
        // counts a non-final CONTINUATION or DATA frame, or a WINDOW_UPDATE, under 1 KiB as
        // overhead (overheadContinuationThreshold, overheadDataThreshold,
        // overheadWindowUpdateThreshold) and answers GOAWAY ENHANCE_YOUR_CALM within a call or
        // two (at once for a short CONTINUATION); 0 turns each of those three counts off.
        // maxHeaderSize and maxHeaderCount still bound a header block; SETTINGS, PING,
        // PRIORITY and RST_STREAM still count as overhead (see the README's known limits).
        http2.setOverheadContinuationThreshold(0);
        http2.setOverheadDataThreshold(0);
        http2.setOverheadWindowUpdateThreshold(0);
        return http2;
    }

    /**
     * How many of one connection's streams run at once. Tomcat's default, 20, would hold a
     * long poll back behind twenty others, a limit of no servlet model. But a connection's
     * frames are read on a pool thread too: streams stalled on the client's flow-control
     * window must not hold every thread, or the WINDOW_UPDATE that frees them is never read.
     * So half of a bounded pool, and all the streams on virtual threads.
     */
    static int runAtOnce(Executor threads) {
        if (threads instanceof StandardThreadExecutor pool) {
            return Math.max(1, Math.min(MAX_STREAMS, pool.getMaxThreads() / 2));
        }
        return MAX_STREAMS;
    }
}
