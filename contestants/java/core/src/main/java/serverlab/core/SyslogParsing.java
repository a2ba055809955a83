package serverlab.core;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * A syslog-parse server's mode and parse counters (spec §7.1), shown in {@code /stats}
 * {@code syslog}. The mode is fixed at start ({@code --syslog-mode count|parse}); in count
 * mode the counters stay 0.
 */
public final class SyslogParsing {
    private final boolean parse;
    private final LongAdder parsed = new LongAdder();
    private final LongAdder malformed = new LongAdder();
    private final LongAdder rfc3164 = new LongAdder();
    private final LongAdder sdElements = new LongAdder();
    private final LongAdder msgBytes = new LongAdder();

    private SyslogParsing(boolean parse) {
        this.parse = parse;
    }

    /** From the start argument; anything but "count" or "parse" is refused. */
    public static SyslogParsing mode(String mode) {
        return switch (mode) {
            case "count" -> new SyslogParsing(false);
            case "parse" -> new SyslogParsing(true);
            default -> throw new IllegalArgumentException("--syslog-mode is count or parse, not " + mode);
        };
    }

    public boolean parses() {
        return parse;
    }

    /** A tally of one connection (or one datagram), its parser reused for every message. */
    public Tally tally() {
        return new Tally();
    }

    void putInto(Map<String, Object> syslog) {
        syslog.put("mode", parse ? "parse" : "count");
        syslog.put("parsed", parsed.sum());
        syslog.put("malformed", malformed.sum());
        syslog.put("rfc3164", rfc3164.sum());
        syslog.put("sd_elements", sdElements.sum());
        syslog.put("msg_bytes", msgBytes.sum());
    }

    /**
     * Counts kept by one thread and added to the shared counters by {@link #publish}: a flood
     * costs no shared write per message, and the counters are exact whenever a sender pauses.
     */
    public final class Tally {
        private final SyslogParser parser = new SyslogParser();
        private byte[] scratch = new byte[0];
        private long tallyParsed;
        private long tallyMalformed;
        private long tally3164;
        private long tallySd;
        private long tallyMsgBytes;

        private Tally() {
        }

        public void parse(byte[] message, int offset, int length) {
            if (!parser.parse(message, offset, length)) {
                tallyMalformed++;
                return;
            }
            tallyParsed++;
            if (parser.rfc3164()) {
                tally3164++;
            }
            tallySd += parser.sdElements();
            tallyMsgBytes += parser.msgLength();
        }

        /** For a message in a buffer that may not be backed by an array (a datagram). */
        public void parse(ByteBuffer buf, int from, int length) {
            if (buf.hasArray()) {
                parse(buf.array(), buf.arrayOffset() + from, length);
                return;
            }
            if (scratch.length < length) {
                scratch = new byte[length];
            }
            buf.get(from, scratch, 0, length);
            parse(scratch, 0, length);
        }

        public void publish() {
            if (tallyParsed + tallyMalformed == 0) {
                return;
            }
            parsed.add(tallyParsed);
            malformed.add(tallyMalformed);
            rfc3164.add(tally3164);
            sdElements.add(tallySd);
            msgBytes.add(tallyMsgBytes);
            tallyParsed = 0;
            tallyMalformed = 0;
            tally3164 = 0;
            tallySd = 0;
            tallyMsgBytes = 0;
        }
    }
}
