package serverlab.tomcat;

import java.nio.channels.SocketChannel;
import org.apache.coyote.http11.Http11NioProtocol;
import org.apache.tomcat.util.net.NioEndpoint;
import serverlab.core.Stats;

/**
 * Tomcat's NIO HTTP/1.1 connector, plus the accepted-connection count that {@code /stats}
 * needs and Tomcat does not keep.
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
        private volatile Stats stats;

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
