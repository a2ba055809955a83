package serverlab.tomcat;

import jakarta.servlet.ServletException;
import java.io.IOException;
import java.util.Collections;
import org.apache.catalina.connector.Request;
import org.apache.catalina.connector.Response;
import org.apache.catalina.valves.ValveBase;
import serverlab.core.ApiException;
import serverlab.core.Framing;
import serverlab.core.Json;

/**
 * Refuses the request framings Tomcat accepts but spec §1.1 does not (HTTP/1.0 with
 * Transfer-Encoding, which Tomcat frames as chunked and keeps alive), before any servlet reads
 * the body. {@code Connection: close} makes Tomcat close once the answer is out, so nothing
 * after the request is read as another one.
 */
final class FramingValve extends ValveBase {
    FramingValve() {
        super(true);
    }

    @Override
    public void invoke(Request request, Response response) throws IOException, ServletException {
        ApiException refused = Framing.refusal(Collections.list(request.getHeaders("Transfer-Encoding")),
                "HTTP/1.0".equals(request.getProtocol()));
        if (refused == null) {
            getNext().invoke(request, response);
            return;
        }
        response.setHeader("Connection", "close");
        Responses.send(response, refused.status(), Json.CONTENT_TYPE, refused.body());
    }
}
