package serverlab.tomcat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.Endpoint;
import serverlab.core.Perf;

final class PerfServlet extends EndpointServlet {
    private static final long serialVersionUID = 1L;

    PerfServlet() {
        super(Endpoint.PERF);
    }

    @Override
    protected void handle(HttpServletRequest request, HttpServletResponse response) throws IOException {
        Responses.send(response, 200, Perf.CONTENT_TYPE, Perf.body());
    }
}
