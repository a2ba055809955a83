package serverlab.core;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The request-framing rules of spec §1.1 that Netty and Tomcat leave to the application: a
 * Transfer-Encoding list (all its field lines as one) ends in {@code chunked}, names it once and
 * holds no other coding, since these servers decode none; and an HTTP/1.0 request carries no
 * Transfer-Encoding. Both libraries refuse the rest themselves (both framing fields, a bad or
 * differing Content-Length, a malformed chunk line).
 */
public final class Framing {
    private Framing() {
    }

    /** The refusal for a request with these Transfer-Encoding field values, or null. */
    public static ApiException refusal(List<String> transferEncodings, boolean http10) {
        if (transferEncodings.isEmpty()) {
            return null;
        }
        if (http10) {
            return ApiException.badRequest("transfer-encoding in an http/1.0 request");
        }
        List<String> codings = new ArrayList<>();
        for (String value : transferEncodings) {
            for (String coding : value.split(",", -1)) {
                codings.add(coding.strip().toLowerCase(Locale.ROOT));
            }
        }
        List<String> before = codings.subList(0, codings.size() - 1);
        if (!codings.get(codings.size() - 1).equals("chunked")) {
            return ApiException.badRequest("chunked is not the final transfer coding");
        }
        if (before.contains("chunked")) {
            return ApiException.badRequest("chunked applied more than once");
        }
        if (!before.isEmpty()) {
            return new ApiException(501, "unknown transfer coding");
        }
        return null;
    }
}
