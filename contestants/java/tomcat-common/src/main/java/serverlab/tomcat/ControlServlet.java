package serverlab.tomcat;

import com.fasterxml.jackson.databind.JsonNode;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.function.Function;
import serverlab.core.Endpoint;

/** A control endpoint: the request (or its JSON body) in, the core's JSON answer out. */
final class ControlServlet extends EndpointServlet {
    private static final long serialVersionUID = 1L;
    private final transient Action action;

    @FunctionalInterface
    interface Action {
        byte[] answer(HttpServletRequest request) throws IOException;
    }

    private ControlServlet(Endpoint endpoint, Action action) {
        super(endpoint);
        this.action = action;
    }

    static ControlServlet reading(Endpoint endpoint, Action action) {
        return new ControlServlet(endpoint, action);
    }

    static ControlServlet posting(Endpoint endpoint, Function<JsonNode, byte[]> action) {
        return new ControlServlet(endpoint, request -> action.apply(readJson(request)));
    }

    @Override
    protected void handle(HttpServletRequest request, HttpServletResponse response) throws IOException {
        Responses.json(response, action.answer(request));
    }
}
