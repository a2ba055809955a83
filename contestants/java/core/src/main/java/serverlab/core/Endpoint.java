package serverlab.core;

/** The spec's endpoints with their paths and allowed methods, so every front end routes alike. */
public enum Endpoint {
    PERF("/perf", "GET"),
    FILES("/files/", "GET, HEAD"),
    UPLOAD("/upload", "POST"),
    TIMESTAMP("/timestamp", "GET"),
    LOGGING("/logging", "POST"),
    STATS("/stats", "GET"),
    EVENT_SET("/event/set", "POST"),
    EVENT_CLEAR("/event/clear", "POST"),
    PUSH("/push", "POST"),
    SSE("/sse", "GET"),
    WEBSOCKET("/ws", "GET");

    private static final Endpoint[] ALL = values(); // values() copies the array on every call

    private final String path;
    private final String allow;

    Endpoint(String path, String allow) {
        this.path = path;
        this.allow = allow;
    }

    public String path() {
        return path;
    }

    /** The {@code Allow} header value. */
    public String allow() {
        return allow;
    }

    public boolean allows(String method) {
        return allow.equals(method) || (this == FILES && (method.equals("GET") || method.equals("HEAD")));
    }

    /** Throws 405 with the Allow header unless the method is allowed. */
    public void checkMethod(String method) {
        if (!allows(method)) {
            throw ApiException.methodNotAllowed(allow);
        }
    }

    /** Whether only loopback clients may call it (spec §5). */
    public boolean loopbackOnly() {
        return this == LOGGING || this == EVENT_SET || this == EVENT_CLEAR;
    }

    /** Finds the endpoint of a decoded path without its query; null for an unknown path. */
    public static Endpoint forPath(String path) {
        if (path.startsWith(FILES.path)) {
            return FILES;
        }
        for (Endpoint endpoint : ALL) {
            if (endpoint.path.equals(path)) {
                return endpoint;
            }
        }
        return null;
    }
}
