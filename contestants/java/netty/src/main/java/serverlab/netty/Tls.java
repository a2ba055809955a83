package serverlab.netty;

import io.netty.handler.ssl.ApplicationProtocolConfig;
import io.netty.handler.ssl.ApplicationProtocolNames;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import java.io.File;
import java.util.List;
import javax.net.ssl.SSLException;

/**
 * Spec §12 and §15: the TLS ports' contexts. The JDK's own SSLEngine under Netty's SslHandler (the
 * netty-tcnative OpenSSL binding is not in the build), TLS 1.2 and 1.3, AEAD suites only,
 * ALPN offering h2 and http/1.1.
 */
final class Tls {
    /** TLS 1.3's suites and TLS 1.2's ECDHE suites with AEAD, in the JDK's names. */
    private static final List<String> AEAD_SUITES = List.of(
            "TLS_AES_128_GCM_SHA256",
            "TLS_AES_256_GCM_SHA384",
            "TLS_CHACHA20_POLY1305_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256");

    private Tls() {
    }

    /** The HTTPS port's: ALPN offers h2 and http/1.1. */
    static SslContext context(String certFile, String keyFile) throws SSLException {
        return builder(certFile, keyFile)
                .applicationProtocolConfig(new ApplicationProtocolConfig(
                        ApplicationProtocolConfig.Protocol.ALPN,
                        ApplicationProtocolConfig.SelectorFailureBehavior.NO_ADVERTISE,
                        ApplicationProtocolConfig.SelectedListenerFailureBehavior.ACCEPT,
                        ApplicationProtocolNames.HTTP_2, ApplicationProtocolNames.HTTP_1_1))
                .build();
    }

    /** The syslog TLS port's (spec §15): the same versions, suites and certificate; no ALPN. */
    static SslContext syslogContext(String certFile, String keyFile) throws SSLException {
        return builder(certFile, keyFile).build();
    }

    private static SslContextBuilder builder(String certFile, String keyFile) {
        return SslContextBuilder.forServer(new File(certFile), new File(keyFile))
                .protocols("TLSv1.3", "TLSv1.2")
                .ciphers(AEAD_SUITES);
    }
}
