package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class PushSpecTest {
    private static PushSpec parse(String json) {
        byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
        return PushSpec.parse(Json.parse(bytes, 0, bytes.length));
    }

    @Test
    void acceptsTheSpecShapesAndDropsRepeatedNames() {
        PushSpec poll = parse("{\"type\":\"longpoll\",\"events\":[\"e1\",\"e1\",\"b.2\"],\"duration_ms\":30000,\"x\":1}");
        assertEquals(List.of("e1", "b.2"), poll.events());
        assertEquals(30000L, poll.durationMs());
        assertNull(parse("{\"type\":\"comet\",\"events\":[]}").durationMs());
    }

    @Test
    void refusesWhatTheSpecRefuses() {
        for (String bad : List.of("[]", "{\"type\":\"poll\",\"events\":[]}",
                "{\"type\":\"longpoll\",\"events\":[\"e1\"]}",
                "{\"type\":\"comet\",\"events\":\"e1\"}",
                "{\"type\":\"comet\",\"events\":[\"bad name\"]}",
                "{\"type\":\"comet\",\"events\":[],\"duration_ms\":0}",
                "{\"type\":\"comet\",\"events\":[],\"duration_ms\":1.5}",
                "{\"type\":\"comet\",\"events\":[],\"duration_ms\":3600001}",
                "{\"type\":\"comet\",\"events\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\","
                        + "\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]}")) {
            assertEquals(400, assertThrows(ApiException.class, () -> parse(bad), bad).status());
        }
    }

    @Test
    void aGrpcSubscribeTakesOneToSixteenDistinctNamesOfTheRule() {
        List<String> sixteen = java.util.stream.IntStream.rangeClosed(1, 16).mapToObj(i -> "e" + i).toList();
        PushSpec spec = PushSpec.grpc(sixteen);
        assertEquals(Transport.GRPC, spec.transport());
        assertEquals(sixteen, spec.events());
        assertNull(spec.durationMs());
        List<String> seventeen = new java.util.ArrayList<>(sixteen);
        seventeen.add("e17");
        for (List<String> bad : List.of(List.<String>of(), List.of("bad name"), List.of("twice", "twice"), seventeen,
                List.of("x".repeat(65)))) {
            assertEquals(400, assertThrows(ApiException.class, () -> PushSpec.grpc(bad)).status(),
                    bad.toString());
        }
    }

    @Test
    void oversizeBodiesAre413() {
        assertEquals(413, assertThrows(ApiException.class, () -> Json.checkDeclaredLength(64 * 1024 + 1)).status());
    }
}
