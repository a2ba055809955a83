package serverlab.tomcat;

import com.fasterxml.jackson.databind.JsonNode;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.ApiException;
import serverlab.core.Endpoint;
import serverlab.core.Json;
import serverlab.core.Loopback;

/**
 * Base of every servlet here: the method and loopback checks of its endpoint, and the
 * mapping of refused input to the spec's error answer.
 */
public abstract class EndpointServlet extends HttpServlet {
    private static final long serialVersionUID = 1L;
    private final transient Endpoint endpoint;

    protected EndpointServlet(Endpoint endpoint) {
        this.endpoint = endpoint;
    }

    @Override
    protected final void service(HttpServletRequest request, HttpServletResponse response) throws IOException {
        try {
            endpoint.checkMethod(request.getMethod());
            Loopback.check(endpoint, request::getRemoteAddr);
            handle(request, response);
        } catch (ApiException refused) {
            Responses.error(response, refused);
        }
    }

    /** A JSON request body under the spec's 64 KiB limit; null when empty. */
    protected static JsonNode readJson(HttpServletRequest request) throws IOException {
        return Json.read(request.getInputStream(), request.getContentLengthLong());
    }

    protected abstract void handle(HttpServletRequest request, HttpServletResponse response) throws IOException;
}
