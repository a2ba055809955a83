package serverlab.tomcat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.ControlApi;
import serverlab.core.Endpoint;
import serverlab.core.PushSpec;
import serverlab.core.RequestManager;
import serverlab.core.Stats;

/** Base of the per-model {@code /push} servlets: how a request waits is theirs, the rest is here. */
public abstract class PushServlet extends EndpointServlet {
    private static final long serialVersionUID = 1L;
    private static final String COMET_CONTENT_TYPE = "application/x-ndjson";
    protected final transient RequestManager manager;
    private final transient Stats stats;

    protected PushServlet(ControlApi control) {
        super(Endpoint.PUSH);
        this.manager = control.requestManager();
        this.stats = control.counters();
    }

    /** Sends a comet stream's header section at once; the body follows chunked, line by line. */
    protected void startStream(HttpServletRequest request, HttpServletResponse response) throws IOException {
        Responses.startStream(request, response, COMET_CONTENT_TYPE, stats);
    }

    /** The validated push body. */
    protected static PushSpec readSpec(HttpServletRequest request) throws IOException {
        return PushSpec.parse(readJson(request));
    }
}
