package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class SyslogFramerTest {
    private final Stats stats = new Stats("test");
    private final SyslogFramer framer = new SyslogFramer(stats);
    /** A server in parse mode (spec §7.1), with a connection's framer. */
    private final Stats parsing = new Stats("test");
    private final SyslogParsing parseMode = SyslogParsing.mode("parse");
    private final SyslogFramer parser = new SyslogFramer(parsing, parseMode);

    {
        parsing.syslogParsing(parseMode);
    }

    private void feedInPieces(String wire, int pieceSize) {
        feedInPieces(framer, wire, pieceSize);
    }

    private static void feedInPieces(SyslogFramer to, String wire, int pieceSize) {
        byte[] bytes = wire.getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < bytes.length; i += pieceSize) {
            to.feed(ByteBuffer.wrap(bytes, i, Math.min(pieceSize, bytes.length - i)));
        }
    }

    private long syslog(String field) {
        Object value = syslogMap().get(field);
        return value == null ? 0 : ((Number) value).longValue();
    }

    private Map<String, Object> syslogMap() {
        return syslogMap(stats);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> syslogMap(Stats of) {
        return (Map<String, Object>) of.snapshot(transport -> 0, Map.of()).get("syslog");
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
    void countModeShowsItsModeAndNoParseCounts() {
        stats.syslogParsing(SyslogParsing.mode("count"));
        SyslogFramer counting = new SyslogFramer(stats, SyslogParsing.mode("count"));
        counting.feed(ByteBuffer.wrap("<14>1 - h a - - - m\n".getBytes(StandardCharsets.US_ASCII)));
        assertEquals("count", syslogMap().get("mode"));
        assertEquals(1, syslog("received"));
        assertEquals(0, syslog("parsed") + syslog("malformed"));
    }

    @Test
    void parseModeParsesEachMessageOfEitherFramingEvenByteByByte() {
        String valid = "<14>1 - h a - - [x@1 k=\"v\"] hello";
        String wire = valid.length() + " " + valid + "<34>Oct 11 22:14:15 h su: two\n"
                // Digits that open a newline-framed message stay part of it: this one is malformed.
                + "1<14>1 - h a - - - three\n" + "9 <14>1 - h" + "\n";
        feedInPieces(parser, wire, 1);
        Map<String, Object> counts = syslogMap(parsing);
        assertEquals("parse", counts.get("mode"));
        assertEquals(List.of(4L, 2L, 2L, 1L, 1L, 5L + 3L), List.of(counts.get("received"), counts.get("parsed"),
                counts.get("malformed"), counts.get("rfc3164"), counts.get("sd_elements"), counts.get("msg_bytes")));
    }

    @Test
    void parseModeKeepsAMessageLongerThanItsBufferWhole() {
        String message = "<14>1 - h a - - - " + "x".repeat(20_000);
        String wire = message.length() + " " + message + message + "\n" + "<14>1 - h a - - - y\n";
        feedInPieces(parser, wire, 1000);
        assertEquals(3L, syslogMap(parsing).get("parsed"));
        assertEquals(40_001L, syslogMap(parsing).get("msg_bytes"));
    }

    @Test
    void aParsedDatagramIsCountedWithoutItsTrailingNewline() {
        SyslogParsing.Tally tally = parseMode.tally();
        ByteBuffer direct = ByteBuffer.allocateDirect(64);
        direct.put("<14>1 - h a - - - udp\n".getBytes(StandardCharsets.US_ASCII)).flip();
        SyslogFramer.countDatagram(parsing, direct, tally);
        SyslogFramer.countDatagram(parsing, ByteBuffer.wrap("<14>1 -\n".getBytes(StandardCharsets.US_ASCII)), tally);
        assertEquals(List.of(2L, 1L, 1L, 3L), List.of(syslogMap(parsing).get("received"), syslogMap(parsing).get("parsed"),
                syslogMap(parsing).get("malformed"), syslogMap(parsing).get("msg_bytes")));
    }

    @Test
    void rfc5425FramesAreCountedAndParsedAcrossAnySplit() {
        int[] lost = {0};
        SyslogFramer tls = SyslogFramer.octetCounting(parsing, parseMode, () -> lost[0]++);
        String message = "<14>1 - h a - - - m\nn";
        feedInPieces(tls, (message.length() + " " + message).repeat(3), 1);
        assertEquals(List.of(3L, 3L, 9L), List.of(syslogMap(parsing).get("received"), syslogMap(parsing).get("parsed"),
                syslogMap(parsing).get("msg_bytes")));
        assertEquals(0, lost[0]);
    }

    @Test
    void rfc5425ABadMsgLenLosesTheFramingAndCountsNothingMore() {
        String good = "5 <14>x";
        for (String bad : List.of("0 <14>x", "05 <14>x", "18446744073709551617 <14>x", "<14>1 - h a - - - x\n",
                "12x <14>x\n", " 5 <14>x")) {
            Stats counted = new Stats("test");
            int[] lost = {0};
            SyslogFramer tls = SyslogFramer.octetCounting(counted, null, () -> lost[0]++);
            feedInPieces(tls, good + good + bad + good + "\n" + good, 3);
            assertEquals(2L, syslogMap(counted).get("received"), bad);
            assertEquals(1, lost[0], bad);
        }
    }

    @Test
    void anUnknownModeIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> SyslogParsing.mode("fast"));
    }

    @Test
    void datagramDropsOneTrailingNewline() {
        SyslogFramer.countDatagram(stats, ByteBuffer.wrap("<14>udp\n".getBytes(StandardCharsets.US_ASCII)));
        SyslogFramer.countDatagram(stats, ByteBuffer.wrap(new byte[0]));
        assertEquals(1, syslog("received"));
        assertEquals(7, syslog("bytes"));
    }
}
