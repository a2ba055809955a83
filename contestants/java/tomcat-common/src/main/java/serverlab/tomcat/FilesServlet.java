package serverlab.tomcat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.catalina.Globals;
import serverlab.core.DocRoot;
import serverlab.core.Endpoint;

/** Streams a file, through the connector's sendfile for large ones as Tomcat's DefaultServlet does. */
final class FilesServlet extends EndpointServlet {
    private static final long serialVersionUID = 1L;
    /** Below this size a plain copy beats setting up sendfile (Tomcat's DefaultServlet default). */
    private static final long SENDFILE_MIN_SIZE = 48 * 1024;
    private final transient DocRoot docRoot;

    FilesServlet(DocRoot docRoot) {
        super(Endpoint.FILES);
        this.docRoot = docRoot;
    }

    @Override
    protected void handle(HttpServletRequest request, HttpServletResponse response) throws IOException {
        // The raw URI, not Tomcat's normalized path: traversal tricks must be seen to be refused.
        String uri = request.getRequestURI();
        Path file = docRoot.resolve(uri.substring(request.getContextPath().length() + Endpoint.FILES.path().length()));
        long size = Files.size(file);
        response.setContentType(DocRoot.CONTENT_TYPE);
        response.setContentLengthLong(size);
        if (request.getMethod().equals("HEAD")) {
            return;
        }
        if (size >= SENDFILE_MIN_SIZE && Boolean.TRUE.equals(request.getAttribute(Globals.SENDFILE_SUPPORTED_ATTR))) {
            request.setAttribute(Globals.SENDFILE_FILENAME_ATTR, file.toString());
            request.setAttribute(Globals.SENDFILE_FILE_START_ATTR, 0L);
            request.setAttribute(Globals.SENDFILE_FILE_END_ATTR, size);
            return;
        }
        Files.copy(file, response.getOutputStream());
    }
}
