package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class SseRequestTest {
    @Test
    void decodesTheQueryAndEchoesItAsTheRequest() {
        SseRequest sse = SseRequest.parse("events=e1%2Cb.2&heartbeat_ms=0&duration_ms=0500&other=x");
        assertEquals(List.of("e1", "b.2"), sse.spec().events());
        assertEquals(Transport.SSE, sse.spec().transport());
        assertEquals(0, sse.heartbeatMs());
        assertEquals(500L, sse.spec().durationMs());
        assertEquals("{\"type\":\"sse\",\"events\":[\"e1\",\"b.2\"],\"heartbeat_ms\":0,\"duration_ms\":500}",
                sse.spec().requestJson());
    }

    @Test
    void defaultsToAHeartbeatEvery15SecondsAndNoEnd() {
        SseRequest sse = SseRequest.parse("events=e1");
        assertEquals(15_000, sse.heartbeatMs());
        assertNull(sse.spec().durationMs());
        assertEquals("{\"type\":\"sse\",\"events\":[\"e1\"]}", sse.spec().requestJson());
    }

    @Test
    void refusesWhatSpecSection10Refuses() {
        String seventeen = String.join(",", Arrays.asList("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q".split(",")));
        for (String bad : Arrays.asList(null, "", "events=", "events=ok,no%20spaces", "events=a,a", "events=a,",
                "events=" + seventeen, "events=a&heartbeat_ms=5", "events=a&heartbeat_ms=1e3",
                "events=a&heartbeat_ms=3600001", "events=a&duration_ms=0", "events=a&duration_ms=-1",
                "events=a&events=b", "events=a&x=1&x=2", "events=%zz")) {
            assertEquals(400, assertThrows(ApiException.class, () -> SseRequest.parse(bad), bad).status());
        }
    }
}
