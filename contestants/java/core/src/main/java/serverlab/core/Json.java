package serverlab.core;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Arrays;

/** The one Jackson mapper, and the spec's rules for JSON request bodies (§5: at most 64 KiB). */
public final class Json {
    public static final int MAX_BODY = 64 * 1024;
    public static final String CONTENT_TYPE = "application/json";
    public static final ObjectMapper MAPPER = new ObjectMapper();
    public static final JsonFactory FACTORY = MAPPER.getFactory();

    private Json() {
    }

    public static ApiException tooLarge() {
        return new ApiException(413, "json body over 64 kib");
    }

    /** Refuses before reading when the client already announced too much. */
    public static void checkDeclaredLength(long contentLength) {
        if (contentLength > MAX_BODY) {
            throw tooLarge();
        }
    }

    /** Reads a JSON body from a blocking stream, stopping as soon as it exceeds the limit. */
    public static JsonNode read(InputStream in, long declaredLength) throws IOException {
        checkDeclaredLength(declaredLength);
        byte[] buf = new byte[declaredLength > 0 ? (int) declaredLength + 1 : 1024];
        int len = 0;
        while (true) {
            if (len == buf.length) {
                if (len > MAX_BODY) {
                    throw tooLarge();
                }
                buf = Arrays.copyOf(buf, Math.min(buf.length * 2, MAX_BODY + 1));
            }
            int n = in.read(buf, len, buf.length - len);
            if (n < 0) {
                break;
            }
            len += n;
        }
        if (len > MAX_BODY) {
            throw tooLarge();
        }
        return parse(buf, 0, len);
    }

    /** Parses a complete body; an empty body gives null so callers decide whether that is allowed. */
    public static JsonNode parse(byte[] buf, int offset, int len) {
        if (len > MAX_BODY) {
            throw tooLarge();
        }
        if (len == 0) {
            return null;
        }
        try {
            JsonNode node = MAPPER.readTree(buf, offset, len);
            return node == null || node.isMissingNode() ? null : node;
        } catch (JsonProcessingException e) {
            throw ApiException.badRequest("malformed json");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The body must be a JSON object. */
    public static JsonNode requireObject(JsonNode body) {
        if (body == null || !body.isObject()) {
            throw ApiException.badRequest("json object expected");
        }
        return body;
    }

    public static byte[] bytes(Object value) {
        try {
            return MAPPER.writeValueAsBytes(value);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot serialize " + value.getClass(), e);
        }
    }

    /**
     * An integer field within [min, max]; JSON floats, strings and out-of-range values are refused.
     * Returns null when the field is absent or JSON null.
     */
    public static Long boundedLong(JsonNode object, String field, long min, long max) {
        JsonNode value = object.get(field);
        if (value == null || value.isNull()) {
            return null;
        }
        if (!value.isIntegralNumber() || !value.canConvertToLong()
                || value.asLong() < min || value.asLong() > max) {
            throw ApiException.badRequest(field + " must be an integer from " + min + " to " + max);
        }
        return value.asLong();
    }
}
