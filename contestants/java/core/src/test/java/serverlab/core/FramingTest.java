package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.List;
import org.junit.jupiter.api.Test;

class FramingTest {
    private static int status(List<String> transferEncodings) {
        return Framing.refusal(transferEncodings, false).status();
    }

    @Test
    void acceptsOneChunkedCodingInAnyCase() {
        assertNull(Framing.refusal(List.of(), false));
        assertNull(Framing.refusal(List.of(), true));
        assertNull(Framing.refusal(List.of("chunked"), false));
        assertNull(Framing.refusal(List.of(" Chunked "), false));
    }

    @Test
    void refusesEveryOtherList() {
        for (String bad : List.of("chunked, gzip", "identity", "", "chunked, chunked")) {
            assertEquals(400, status(List.of(bad)), bad);
        }
        assertEquals(400, status(List.of("chunked", "chunked")));
        assertEquals(501, status(List.of("x-foo, chunked")));
        assertEquals(501, status(List.of("gzip", "chunked")));
        assertEquals(400, Framing.refusal(List.of("chunked"), true).status(), "HTTP/1.0");
    }
}
