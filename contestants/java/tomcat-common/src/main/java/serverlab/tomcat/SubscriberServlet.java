package serverlab.tomcat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.ControlApi;
import serverlab.core.Endpoint;
import serverlab.core.RequestManager;
import serverlab.core.Stats;

/** Base of the servlets whose requests become subscribers: {@code /push} and {@code /sse}. */
public abstract class SubscriberServlet extends EndpointServlet {
    private static final long serialVersionUID = 1L;
    protected final transient RequestManager manager;
    protected final transient Stats stats;

    protected SubscriberServlet(Endpoint endpoint, ControlApi control) {
        super(endpoint);
        this.manager = control.requestManager();
        this.stats = control.counters();
    }

    /**
     * Sends a stream's header section at once (its body follows chunked, message by message)
     * and counts the response now, long before the exchange ends.
     */
    protected void startStream(HttpServletRequest request, HttpServletResponse response, String contentType)
            throws IOException {
        response.setStatus(200);
        response.setContentType(contentType);
        response.flushBuffer();
        StatsValve.headerSent(request, stats);
    }
}
