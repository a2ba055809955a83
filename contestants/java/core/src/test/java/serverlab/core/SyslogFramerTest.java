package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

class SyslogFramerTest {
    private final Stats stats = new Stats("test");
    private final SyslogFramer framer = new SyslogFramer(stats);

    private void feedInPieces(String wire, int pieceSize) {
        byte[] bytes = wire.getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < bytes.length; i += pieceSize) {
            framer.feed(ByteBuffer.wrap(bytes, i, Math.min(pieceSize, bytes.length - i)));
        }
    }

    @SuppressWarnings("unchecked")
    private long syslog(String field) {
        Map<String, Object> doc = stats.snapshot(transport -> 0, Map.of());
        return ((Number) ((Map<String, Object>) doc.get("syslog")).get(field)).longValue();
    }

    @Test
    void mixesOctetCountingAndNewlineFramingEvenByteByByte() {
        feedInPieces("11 <14>1 hello<14>newline\n4 a\nbc<14>x\n", 1);
        assertEquals(4, syslog("received"));
        assertEquals(11 + 11 + 4 + 5, syslog("bytes"));
    }

    @Test
    void octetCountedBodyMayContainNewlines() {
        feedInPieces("7 ab\ncd\n\n", 3);
        assertEquals(1, syslog("received"));
        assertEquals(7, syslog("bytes"));
    }

    @Test
    void emptyLinesAndIncompleteMessagesAreNotCounted() {
        feedInPieces("\n\n<14>done\n20 too short", 4);
        assertEquals(1, syslog("received"));
        assertEquals(8, syslog("bytes"));
    }

    @Test
    void digitsWithoutSpaceAreANewlineFramedMessage() {
        feedInPieces("12abc\n3\n", 2);
        assertEquals(2, syslog("received"));
        assertEquals(5 + 1, syslog("bytes"));
    }

    @Test
    void datagramDropsOneTrailingNewline() {
        SyslogFramer.countDatagram(stats, ByteBuffer.wrap("<14>udp\n".getBytes(StandardCharsets.US_ASCII)));
        SyslogFramer.countDatagram(stats, ByteBuffer.wrap(new byte[0]));
        assertEquals(1, syslog("received"));
        assertEquals(7, syslog("bytes"));
    }
}
