package serverlab.tomcat;

import jakarta.servlet.ServletInputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.Endpoint;
import serverlab.core.UploadDigest;

final class UploadServlet extends EndpointServlet {
    private static final long serialVersionUID = 1L;
    private static final int BUFFER_SIZE = 64 * 1024;

    UploadServlet() {
        super(Endpoint.UPLOAD);
    }

    @Override
    protected void handle(HttpServletRequest request, HttpServletResponse response) throws IOException {
        UploadDigest.checkDeclaredLength(request.getContentLengthLong());
        UploadDigest digest = new UploadDigest();
        byte[] buffer = new byte[BUFFER_SIZE];
        ServletInputStream in = request.getInputStream();
        for (int n = in.read(buffer); n >= 0; n = in.read(buffer)) {
            digest.update(buffer, 0, n);
        }
        Responses.json(response, digest.answer());
    }
}
