package serverlab.tomcat;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.ApiException;

/** Every path that is not an endpoint. */
final class NotFoundServlet extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void service(HttpServletRequest request, HttpServletResponse response) throws IOException {
        Responses.error(response, ApiException.notFound("unknown path"));
    }
}
