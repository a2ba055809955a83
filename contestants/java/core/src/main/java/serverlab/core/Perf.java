package serverlab.core;

import java.nio.charset.StandardCharsets;

/** The fixed {@code GET /perf} document (spec §2, the seed 003 length). */
public final class Perf {
    public static final String CONTENT_TYPE = "text/plain";
    private static final byte[] BODY =
            "serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n"
                    .getBytes(StandardCharsets.US_ASCII);

    static {
        if (BODY.length != 84) {
            throw new AssertionError("the /perf body must be 84 bytes, is " + BODY.length);
        }
    }

    private Perf() {
    }

    /** The shared body; callers must not modify it. */
    public static byte[] body() {
        return BODY;
    }
}
