package serverlab.core;

import java.nio.charset.StandardCharsets;

/**
 * A request the server refuses: carries the HTTP status and the short reason that becomes the
 * spec's {@code {"error": "..."}} body. Thrown by the shared validation so every front end maps
 * bad input to the same answer.
 */
public final class ApiException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int status;
    private final String headerName;
    private final String headerValue;

    public ApiException(int status, String reason) {
        this(status, reason, null, null);
    }

    private ApiException(int status, String reason, String headerName, String headerValue) {
        super(reason, null, false, false); // no stack trace: hostile input is routine, not exceptional
        this.status = status;
        this.headerName = headerName;
        this.headerValue = headerValue;
    }

    public static ApiException badRequest(String reason) {
        return new ApiException(400, reason);
    }

    public static ApiException notFound(String reason) {
        return new ApiException(404, reason);
    }

    public static ApiException methodNotAllowed(String allow) {
        return new ApiException(405, "method not allowed", "Allow", allow);
    }

    /** A WebSocket upgrade of another version than 13 (spec §11). */
    public static ApiException upgradeRequired(String reason) {
        return new ApiException(426, reason, "Sec-WebSocket-Version", "13");
    }

    public int status() {
        return status;
    }

    /** The header this answer needs ({@code Allow} for a 405), or null. */
    public String headerName() {
        return headerName;
    }

    public String headerValue() {
        return headerValue;
    }

    public byte[] body() {
        return errorBody(getMessage());
    }

    /** The spec §1 error body for any reason, also used for errors the platform itself produces. */
    public static byte[] errorBody(String reason) {
        StringBuilder json = new StringBuilder(reason.length() + 14).append("{\"error\":\"");
        for (int i = 0; i < reason.length(); i++) {
            char c = reason.charAt(i);
            if (c == '"' || c == '\\') {
                json.append('\\').append(c);
            } else if (c >= 0x20) {
                json.append(c);
            }
        }
        return json.append("\"}").toString().getBytes(StandardCharsets.UTF_8);
    }

    /** A reason phrase for statuses the platform produces without one of ours. */
    public static String reasonFor(int status) {
        switch (status) {
            case 400: return "bad request";
            case 403: return "forbidden";
            case 404: return "not found";
            case 405: return "method not allowed";
            case 408: return "request timeout";
            case 411: return "length required";
            case 413: return "request body too large";
            case 414: return "request uri too long";
            case 415: return "unsupported media type";
            case 417: return "expectation failed";
            case 426: return "upgrade required";
            case 431: return "request header fields too large";
            case 501: return "not implemented";
            case 503: return "service unavailable";
            case 505: return "http version not supported";
            default: return status >= 500 ? "internal server error" : "request refused";
        }
    }
}
