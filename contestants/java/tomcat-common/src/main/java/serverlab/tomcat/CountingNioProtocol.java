package serverlab.tomcat;

import java.nio.channels.SocketChannel;
import org.apache.coyote.http11.Http11NioProtocol;
import org.apache.tomcat.util.net.NioEndpoint;
import serverlab.core.Stats;

/**
 * Tomcat's NIO HTTP/1.1 connector, plus the accepted-connection count that {@code /stats}
 * needs and Tomcat does not keep, and ALPN's {@code http/1.1} on a TLS port (spec §12).
 */
public final class CountingNioProtocol extends Http11NioProtocol {
    private final CountingEndpoint endpoint;

    public CountingNioProtocol() {
        this(new CountingEndpoint());
    }

    private CountingNioProtocol(CountingEndpoint endpoint) {
        super(endpoint);
        this.endpoint = endpoint;
    }

    /** Counts accepted connections; the open ones are Tomcat's own count, {@link #getConnectionCount()}. */
    void countInto(Stats stats) {
        endpoint.stats = stats;
    }

    private static final class CountingEndpoint extends NioEndpoint {
        /** ALPN's name of HTTP/1.1, which Tomcat serves but never selects by itself. */
        private static final String HTTP_11 = "http/1.1";
        private volatile Stats stats;

        /**
         * Tomcat offers by ALPN only its upgrade protocols (h2), so a client offering
         * {@code http/1.1} alone got no answer; spec §12 wants it chosen. Kept last: JSSE
         * picks by the server's order, and h2 goes first to a client that offers both.
         */
        @Override
        public void addNegotiatedProtocol(String protocol) {
            negotiableProtocols.remove(HTTP_11);
            super.addNegotiatedProtocol(protocol);
            negotiableProtocols.add(HTTP_11);
        }

        @Override
        protected boolean setSocketOptions(SocketChannel socket) {
            Stats counters = stats;
            if (counters != null) {
                counters.connectionOpened();
            }
            return super.setSocketOptions(socket);
        }
    }
}
