package serverlab.tomcat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.ControlApi;
import serverlab.core.Endpoint;
import serverlab.core.PushSpec;

/** Base of the per-model {@code /push} servlets: how a request waits is theirs, the rest is here. */
public abstract class PushServlet extends SubscriberServlet {
    private static final long serialVersionUID = 1L;
    private static final String COMET_CONTENT_TYPE = "application/x-ndjson";

    protected PushServlet(ControlApi control) {
        super(Endpoint.PUSH, control);
    }

    /** Sends a comet stream's header section at once; the body follows chunked, line by line. */
    protected void startStream(HttpServletRequest request, HttpServletResponse response) throws IOException {
        startStream(request, response, COMET_CONTENT_TYPE);
    }

    /** The validated push body. */
    protected static PushSpec readSpec(HttpServletRequest request) throws IOException {
        return PushSpec.parse(readJson(request));
    }
}
