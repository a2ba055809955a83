package serverlab.core;

import java.util.Base64;
import java.util.List;
import java.util.function.Function;

/**
 * The checks of a {@code GET /ws} upgrade (spec §11), made before the platform's WebSocket
 * implementation sees the request, so that every refusal gets the spec's status and error
 * body whichever library does the framing.
 */
public final class WebSocketHandshake {
    private static final int KEY_BYTES = 16;

    private WebSocketHandshake() {
    }

    /**
     * Throws the answer to a request that is not a valid upgrade: 400, or 426 for a version
     * other than 13. {@code headers} gives every value of a header (case-insensitive name).
     */
    public static void check(Function<String, List<String>> headers) {
        if (!hasToken(headers.apply("Upgrade"), "websocket")) {
            throw ApiException.badRequest("a websocket upgrade is required");
        }
        if (!hasToken(headers.apply("Connection"), "upgrade")) {
            throw ApiException.badRequest("connection: upgrade is required");
        }
        List<String> version = headers.apply("Sec-WebSocket-Version");
        if (version.isEmpty()) {
            throw ApiException.badRequest("sec-websocket-version is required");
        }
        if (version.size() != 1 || !version.get(0).trim().equals("13")) {
            throw ApiException.upgradeRequired("sec-websocket-version 13 only");
        }
        List<String> key = headers.apply("Sec-WebSocket-Key");
        if (key.size() != 1 || decodedLength(key.get(0).trim()) != KEY_BYTES) {
            throw ApiException.badRequest("sec-websocket-key is not 16 bytes in base64");
        }
    }

    private static boolean hasToken(List<String> values, String token) {
        for (String value : values) {
            for (String candidate : value.split(",")) {
                if (candidate.trim().equalsIgnoreCase(token)) {
                    return true;
                }
            }
        }
        return false;
    }

    private static int decodedLength(String key) {
        try {
            return Base64.getDecoder().decode(key).length;
        } catch (IllegalArgumentException notBase64) {
            return -1;
        }
    }
}
