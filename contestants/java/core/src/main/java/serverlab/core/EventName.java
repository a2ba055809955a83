package serverlab.core;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.regex.Pattern;

/** The spec's event-name rule: {@code ^[A-Za-z0-9_.-]{1,64}$}. */
public final class EventName {
    private static final Pattern PATTERN = Pattern.compile("[A-Za-z0-9_.-]{1,64}");

    private EventName() {
    }

    public static boolean matches(String name) {
        return PATTERN.matcher(name).matches();
    }

    public static String require(JsonNode value) {
        if (value == null || !value.isTextual()) {
            throw invalid();
        }
        return require(value.asText());
    }

    public static String require(String name) {
        if (!matches(name)) {
            throw invalid();
        }
        return name;
    }

    private static ApiException invalid() {
        return ApiException.badRequest("event name must match [A-Za-z0-9_.-]{1,64}");
    }
}
