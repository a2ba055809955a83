package serverlab.tomcat;

import java.io.IOException;
import java.io.PrintWriter;
import org.apache.catalina.connector.Request;
import org.apache.catalina.connector.Response;
import org.apache.catalina.valves.ErrorReportValve;
import serverlab.core.ApiException;
import serverlab.core.Json;

/**
 * Replaces Tomcat's HTML error page: errors Tomcat produces itself (a bad request, an
 * exception) get the spec's JSON error body like every error of ours.
 */
public final class JsonErrorReportValve extends ErrorReportValve {
    @Override
    protected void report(Request request, Response response, Throwable throwable) {
        int status = response.getStatus();
        if (status < 400 || response.getContentWritten() > 0 || !response.setErrorReported()) {
            return;
        }
        if (status == 400 && isHeaderTooLarge(throwable)) {
            // Tomcat answers an oversized header section with a bare 400; spec §8 prefers 431.
            status = 431;
            response.setStatus(status);
        }
        byte[] body = ApiException.errorBody(ApiException.reasonFor(status));
        try {
            response.setContentType(Json.CONTENT_TYPE);
            response.setCharacterEncoding("utf-8");
            response.setContentLength(body.length);
            PrintWriter writer = response.getReporter();
            if (writer != null) {
                writer.write(new String(body, java.nio.charset.StandardCharsets.UTF_8));
                response.finishResponse();
            }
        } catch (IOException | IllegalStateException e) {
            // The client is gone or the response is already under way: nothing left to report to.
        }
    }

    private static boolean isHeaderTooLarge(Throwable throwable) {
        return throwable instanceof IllegalArgumentException && throwable.getMessage() != null
                && throwable.getMessage().contains("header is too large");
    }
}
