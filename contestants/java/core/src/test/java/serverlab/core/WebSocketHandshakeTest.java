package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class WebSocketHandshakeTest {
    private static Map<String, List<String>> valid() {
        Map<String, List<String>> headers = new HashMap<>();
        headers.put("Upgrade", List.of("WebSocket"));
        headers.put("Connection", List.of("keep-alive, Upgrade"));
        headers.put("Sec-WebSocket-Version", List.of("13"));
        headers.put("Sec-WebSocket-Key", List.of("dGhlIHNhbXBsZSBub25jZQ=="));
        return headers;
    }

    private static ApiException refusal(Map<String, List<String>> headers) {
        return assertThrows(ApiException.class,
                () -> WebSocketHandshake.check(name -> headers.getOrDefault(name, List.of())));
    }

    @Test
    void acceptsAVersion13Upgrade() {
        Map<String, List<String>> headers = valid();
        assertDoesNotThrow(() -> WebSocketHandshake.check(name -> headers.getOrDefault(name, List.of())));
    }

    @Test
    void refusesIncompleteUpgradesWith400() {
        for (String header : List.of("Upgrade", "Connection", "Sec-WebSocket-Version", "Sec-WebSocket-Key")) {
            Map<String, List<String>> headers = valid();
            headers.remove(header);
            assertEquals(400, refusal(headers).status(), header);
        }
        Map<String, List<String>> shortKey = valid();
        shortKey.put("Sec-WebSocket-Key", List.of("c2hvcnQ="));
        assertEquals(400, refusal(shortKey).status());
    }

    @Test
    void answersAnotherVersionWith426NamingVersion13() {
        Map<String, List<String>> headers = valid();
        headers.put("Sec-WebSocket-Version", List.of("12"));
        ApiException refused = refusal(headers);
        assertEquals(426, refused.status());
        assertEquals("Sec-WebSocket-Version", refused.headerName());
        assertEquals("13", refused.headerValue());
    }
}
