package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Spec §7.1's rules, message by message (the messages of go-nethttp's tests and more). */
class SyslogParserTest {
    private final SyslogParser parser = new SyslogParser();

    /** Each char U+0000-U+00FF is one octet, as in spec/cases/syslog-parse.toml. */
    private boolean parse(String message) {
        byte[] padded = ("xx" + message + "yy").getBytes(StandardCharsets.ISO_8859_1);
        // Parsed in the middle of a larger buffer: nothing may be read outside its range.
        return parser.parse(padded, 2, padded.length - 4);
    }

    @Test
    void aSyslog5424MessageIsTakenApartFieldByField() {
        assertTrue(parse("<165>1 2026-11-25T20:00:00.001+01:00 host app 42 ID47 [a@1 b=\"c\\\"d\"][e] hi there"));
        assertEquals(List.of("2026-11-25T20:00:00.001+01:00", "host", "app", "42", "ID47", "hi there"),
                List.of(parser.timestamp(), parser.host(), parser.app(), parser.procid(), parser.msgid(), parser.msg()));
        assertEquals(165, parser.pri());
        assertEquals(2, parser.sdElements());
        assertEquals(8, parser.msgLength());
        assertFalse(parser.rfc3164());
    }

    @Test
    void aDashIsANilFieldAndAnAbsentMsgIsEmpty() {
        assertTrue(parse("<0>1 - - - - - -"));
        assertNull(parser.host());
        assertNull(parser.timestamp());
        assertEquals(0, parser.msgLength());
        assertEquals(0, parser.sdElements());
        assertTrue(parse("<34>1 2026-11-25T20:00:00Z mymachine su - ID47 -"));
        assertEquals("ID47", parser.msgid());
        assertNull(parser.procid());
        assertEquals(0, parser.msgLength());
    }

    @Test
    void structuredDataElementsAndEscapesAreCounted() {
        assertTrue(parse("<14>1 - host app - - [x@1 a=\"q\\\"uote\" b=\"back\\\\slash\" c=\"close\\]\"]"));
        assertEquals(1, parser.sdElements());
        assertEquals(0, parser.msgLength());
        assertTrue(parse("<14>1 - host app - - [meta] m"));
        assertEquals(1, parser.sdElements());
        assertEquals("m", parser.msg());
    }

    @Test
    void aBomIsNotPartOfMsgAndWhatFollowsMustBeUtf8() {
        assertTrue(parse("<14>1 - h a - - - \u00EF\u00BB\u00BFh\u00C3\u00A9"));
        assertEquals(3, parser.msgLength());
        assertEquals("hé", parser.msg());
        assertFalse(parse("<14>1 - h a - - - \u00EF\u00BB\u00BF\u00FF"));
        assertFalse(parse("<14>1 - h a - - - \u00EF\u00BB\u00BFbad \u00C3\u0028"));
        // Without a BOM MSG is any octets.
        assertTrue(parse("<14>1 - h a - - - \u00FF"));
    }

    @Test
    void utf8ValidityRefusesOverlongFormsSurrogatesAndCutSequences() {
        assertTrue(utf8("\u00F0\u009F\u0098\u0080 \u00E2\u0082\u00AC \u00C3\u00A9 a"));
        for (String bad : List.of("\u00C0\u00AF", "\u00E0\u0080\u00AF", "\u00ED\u00A0\u0080", "\u00F4\u0090\u0080\u0080",
                "\u00E2\u0082", "\u0080", "\u00F8\u0088\u0080\u0080\u0080")) {
            assertFalse(utf8(bad), () -> "valid: " + bad);
        }
    }

    private static boolean utf8(String octets) {
        byte[] bytes = octets.getBytes(StandardCharsets.ISO_8859_1);
        return SyslogParser.validUtf8(bytes, 0, bytes.length);
    }

    @Test
    void aSyslog3164MessageIsParsedWithItsTagAndPid() {
        assertTrue(parse("<86>Nov  5 01:02:03 host sshd[123]: Accepted"));
        assertTrue(parser.rfc3164());
        assertEquals(List.of("Nov  5 01:02:03", "host", "sshd", "123", "Accepted"),
                List.of(parser.timestamp(), parser.host(), parser.app(), parser.procid(), parser.msg()));
        assertTrue(parse("<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8"));
        assertEquals("su", parser.app());
        assertEquals(42, parser.msgLength());
    }

    @Test
    void aSyslog3164MessageWithoutATagIsAllMsg() {
        assertTrue(parse("<13>Dec 31 23:59:59 host just text"));
        assertNull(parser.app());
        assertEquals("just text", parser.msg());
        // A tag of 33 characters is no tag: it stays in MSG.
        String longTag = "a".repeat(33) + ": m";
        assertTrue(parse("<13>Dec 31 23:59:59 host " + longTag));
        assertEquals(longTag, parser.msg());
        assertTrue(parse("<13>Dec 31 23:59:59 host "));
        assertEquals(0, parser.msgLength());
    }

    @Test
    void badPrisTruncatedHeadersAndBrokenStructuredDataAreMalformed() {
        for (String text : List.of(
                "14>1 - h a - - - m", "<1a>1 - h a - - - m", "<192>1 - h a - - - m", "<014>1 - h a - - - m",
                "<1000>1 - h a - - - m", "<>1 - h a - - - m", "<14 1 - h a - - - m", "<14>1", "<14>1 - host",
                "<14>2 - h a - - - m", "<14>1 2026-11-25T20:00:00 h a - - - m", "<14>1 2026-11-25 20:00:00Z h a - - - m",
                "<14>1 2026-11-25T20:00:00.1234567Z h a - - - m", "<14>1 -  h a - - - m",
                "<14>1 - h " + "a".repeat(49) + " - - - m", "<14>1 - h a - - [x@1]m", "<14>1 - h a - - [x@1 a=\"b]c\"] m",
                "<14>1 - h a - - [x@1 a=\"open", "<14>1 - h a - - [x@1 a=\"b\"", "<14>1 - h a - - [x@1 a=\"\\n\"]",
                "<14>1 - h a - - -x", "<14>1 - h a - - []", "<14>1 - h\u0001 a - - - m", "<14>1 - h a - - [x@1 a=b]",
                "<34>Oct 11 22:14 h su: m", "<34>Foo 11 22:14:15 mymachine su: m", "<34>Oct 01 22:14:15 h su: m",
                "<34>Oct 11 22:14:15 ", "<34>Oct 11 22:14:15 mymachine", "<34>just text", "<14>")) {
            assertFalse(parse(text), () -> "parsed: " + text);
        }
    }

    @Test
    void theLongestAllowedFieldsAndTheLargestPriParse() {
        assertTrue(parse("<191>1 - " + "h".repeat(255) + " " + "a".repeat(48) + " " + "p".repeat(128) + " "
                + "m".repeat(32) + " [" + "n".repeat(32) + "] x"));
        assertFalse(parse("<191>1 - " + "h".repeat(256) + " a - - - x"));
        assertFalse(parse("<14>1 - h a - " + "m".repeat(33) + " - x"));
        assertFalse(parse("<14>1 - h a - - [" + "n".repeat(33) + "] x"));
    }
}
