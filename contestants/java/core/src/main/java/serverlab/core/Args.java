package serverlab.core;

import java.util.HashMap;
import java.util.Map;

/** {@code --key value} command-line options, as the manifests' start commands pass them. */
public final class Args {
    private final Map<String, String> values = new HashMap<>();

    public Args(String[] argv) {
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + argv[i]);
            }
            String key = argv[i].substring(2);
            boolean hasValue = i + 1 < argv.length && !argv[i + 1].startsWith("--");
            values.put(key, hasValue ? argv[++i] : "true");
        }
    }

    public boolean has(String key) {
        return values.containsKey(key);
    }

    public String string(String key, String fallback) {
        return values.getOrDefault(key, fallback);
    }

    public String required(String key) {
        String value = values.get(key);
        if (value == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return value;
    }

    public int integer(String key, int fallback) {
        String value = values.get(key);
        return value == null ? fallback : Integer.parseInt(value);
    }
}
