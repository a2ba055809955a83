package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The parser against the spec's own test vectors (spec/vectors/syslog.json, shared by every
 * contestant's tests). A vector's string stands for bytes, one character a byte.
 */
class SyslogVectorsTest {
    private static final Path VECTORS = Path.of("..", "..", "..", "spec", "vectors", "syslog.json");
    private static final String[] TEXT_FIELDS = {"timestamp", "host", "app", "procid", "msgid", "msg"};

    private final SyslogParser parser = new SyslogParser();

    private static JsonNode vectors() throws IOException {
        return new ObjectMapper().readTree(VECTORS.toFile());
    }

    private boolean parse(String latin1) {
        byte[] padded = ("xx" + latin1 + "yy").getBytes(StandardCharsets.ISO_8859_1);
        // Parsed in the middle of a larger buffer: nothing may be read outside its range.
        return parser.parse(padded, 2, padded.length - 4);
    }

    /** A field as this parser gives it: the vector's bytes read as UTF-8, or null. */
    private static String asParsed(JsonNode field) {
        if (field.isNull()) {
            return null;
        }
        return new String(field.asText().getBytes(StandardCharsets.ISO_8859_1), StandardCharsets.UTF_8);
    }

    @Test
    void theSpecsParsedVectorsAreTakenApartFieldByField() throws IOException {
        for (JsonNode vector : vectors().get("parsed")) {
            String name = vector.get("name").asText();
            assertTrue(parse(vector.get("input").asText()), name);
            JsonNode want = vector.get("fields");
            Map<String, Object> expected = new HashMap<>();
            Map<String, Object> got = new HashMap<>();
            String[] values = {parser.timestamp(), parser.host(), parser.app(), parser.procid(),
                parser.msgid(), parser.msg()};
            for (int i = 0; i < TEXT_FIELDS.length; i++) {
                expected.put(TEXT_FIELDS[i], asParsed(want.get(TEXT_FIELDS[i])));
                got.put(TEXT_FIELDS[i], values[i]);
            }
            expected.putAll(Map.of("pri", want.get("pri").asInt(),
                    "sd_elements", want.get("sd_elements").asInt(), "rfc3164", want.get("rfc3164").asBoolean()));
            got.putAll(Map.of("pri", parser.pri(), "sd_elements", parser.sdElements(),
                    "rfc3164", parser.rfc3164()));
            assertEquals(expected, got, name + " " + Arrays.toString(values));
        }
    }

    @Test
    void theSpecsMalformedVectorsAreMalformed() throws IOException {
        for (JsonNode vector : vectors().get("malformed")) {
            assertFalse(parse(vector.get("input").asText()), vector.get("name").asText());
        }
    }
}
