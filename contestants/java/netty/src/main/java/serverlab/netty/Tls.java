package serverlab.netty;

import io.grpc.netty.GrpcSslContexts;
import io.netty.handler.ssl.ApplicationProtocolConfig;
import io.netty.handler.ssl.ApplicationProtocolNames;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import java.io.File;
import javax.net.ssl.SSLException;
import serverlab.core.AeadSuites;

/**
 * Spec §12 and §15: the TLS ports' contexts. The JDK's own SSLEngine under Netty's SslHandler (the
 * netty-tcnative OpenSSL binding is not in the build), TLS 1.2 and 1.3, AEAD suites only,
 * ALPN offering h2 and http/1.1.
 */
final class Tls {
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

    /**
     * The gRPC TLS port's (spec §16): grpc-netty's own settings (ALPN offering h2 alone), then
     * the same versions and suites as the HTTPS port.
     */
    static SslContext grpcContext(String certFile, String keyFile) throws SSLException {
        SslContextBuilder builder = SslContextBuilder.forServer(new File(certFile), new File(keyFile));
        return restrict(GrpcSslContexts.configure(builder, SslProvider.JDK)).build();
    }

    /** The syslog TLS port's (spec §15): the same versions, suites and certificate; no ALPN. */
    static SslContext syslogContext(String certFile, String keyFile) throws SSLException {
        return builder(certFile, keyFile).build();
    }

    private static SslContextBuilder builder(String certFile, String keyFile) {
        return restrict(SslContextBuilder.forServer(new File(certFile), new File(keyFile)));
    }

    /** Spec §12: TLS 1.2 and 1.3, AEAD suites only. */
    private static SslContextBuilder restrict(SslContextBuilder builder) {
        return builder.protocols("TLSv1.3", "TLSv1.2").ciphers(AeadSuites.ALL);
    }
}
