package serverlab.core;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Parses one syslog message (spec §7.1, part {@code syslog-parse}): RFC 5424, and RFC 3164
 * where the message is in that form, strictly, on the message's bytes. The spec's rules of
 * what is malformed are exact (VERSION 1 only, a PRI of at most 191, a BOM followed by
 * UTF-8), so that every contestant counts the same messages malformed; that is why this is a
 * small parser of its own (the rules of go-nethttp's syslogparse.go) rather than a library
 * with its own reading of the RFCs.
 *
 * <p>One instance is reused for every message of a connection: a parse allocates nothing,
 * and the fields are kept as offsets into the buffer parsed, valid until the next parse.
 */
public final class SyslogParser {
    private static final int MAX_PRI = 191;
    /** TIMESTAMP, HOSTNAME, APP-NAME, PROCID, MSGID: their longest values (spec §7.1). */
    private static final int[] HEADER_LIMITS = {64, 255, 48, 128, 32};
    private static final int TIMESTAMP = 0;
    private static final int HOST = 1;
    private static final int APP = 2;
    private static final int PROCID = 3;
    private static final int MSGID = 4;
    private static final int MSG = 5;
    private static final int SD_NAME_MAX = 32;
    private static final int TAG_MAX = 32;
    private static final int TAG_PID_MAX = 128;
    private static final int TIMESTAMP_3164_LENGTH = 15;
    private static final String MONTHS = "JanFebMarAprMayJunJulAugSepOctNovDec";
    private static final String SHAPE_5424 = "DDDD-DD-DDTDD:DD:DD";
    /** Ends a scan that failed: no position in a buffer is negative. */
    private static final int FAIL = -1;

    private byte[] buf;
    private int end;
    private int pri;
    private boolean rfc3164;
    private int sdElements;
    /** Start and end of each field (TIMESTAMP … MSGID, MSG); start -1 is a nil field ("-"). */
    private final int[] starts = new int[6];
    private final int[] ends = new int[6];

    /** Parses {@code length} bytes of {@code message} from {@code offset}; false if malformed. */
    public boolean parse(byte[] message, int offset, int length) {
        buf = message;
        end = offset + length;
        Arrays.fill(starts, -1);
        Arrays.fill(ends, -1);
        rfc3164 = false;
        sdElements = 0;
        int pos = parsePri(offset);
        if (pos == FAIL) {
            return false;
        }
        if (pos < end && buf[pos] >= '1' && buf[pos] <= '9') {
            return parse5424(pos);
        }
        return parse3164(pos);
    }

    public int pri() {
        return pri;
    }

    public boolean rfc3164() {
        return rfc3164;
    }

    public int sdElements() {
        return sdElements;
    }

    /** MSG's length in octets, the BOM not included; 0 when there is none. */
    public int msgLength() {
        return starts[MSG] < 0 ? 0 : ends[MSG] - starts[MSG];
    }

    /** For tests and logs: the fields as text, null for a nil one. */
    public String timestamp() {
        return field(TIMESTAMP);
    }

    public String host() {
        return field(HOST);
    }

    public String app() {
        return field(APP);
    }

    public String procid() {
        return field(PROCID);
    }

    public String msgid() {
        return field(MSGID);
    }

    public String msg() {
        return field(MSG);
    }

    private String field(int index) {
        int start = starts[index];
        return start < 0 ? null : new String(buf, start, ends[index] - start, StandardCharsets.UTF_8);
    }

    private void keep(int index, int start, int stop) {
        starts[index] = start;
        ends[index] = stop;
    }

    /** {@code <} 1-3 digits without a leading zero {@code >}, at most 191; the position after it. */
    private int parsePri(int offset) {
        if (end - offset < 3 || buf[offset] != '<') {
            return FAIL;
        }
        int pos = offset + 1;
        int value = 0;
        while (pos < end && pos <= offset + 3 && isDigit(buf[pos])) {
            value = value * 10 + buf[pos] - '0';
            pos++;
        }
        int digits = pos - offset - 1;
        if (digits == 0 || pos >= end || buf[pos] != '>' || (digits > 1 && buf[offset + 1] == '0')
                || value > MAX_PRI) {
            return FAIL;
        }
        pri = value;
        return pos + 1;
    }

    private boolean parse5424(int pos) {
        if (end - pos < 2 || buf[pos] != '1' || buf[pos + 1] != ' ') {
            return false;
        }
        pos += 2;
        for (int i = TIMESTAMP; i <= MSGID; i++) {
            pos = token(pos, HEADER_LIMITS[i], i);
            if (pos == FAIL) {
                return false;
            }
        }
        if (starts[TIMESTAMP] >= 0 && !validTimestamp5424(starts[TIMESTAMP], ends[TIMESTAMP])) {
            return false;
        }
        pos = structuredData(pos);
        if (pos == FAIL) {
            return false;
        }
        if (pos < end) {
            if (buf[pos] != ' ') {
                return false;
            }
            pos++;
        }
        return message(pos);
    }

    /** MSG: all that is left; after a BOM it must be UTF-8, and the BOM is not part of it. */
    private boolean message(int pos) {
        if (end - pos >= 3 && buf[pos] == (byte) 0xef && buf[pos + 1] == (byte) 0xbb && buf[pos + 2] == (byte) 0xbf) {
            pos += 3;
            if (!validUtf8(buf, pos, end)) {
                return false;
            }
        }
        keep(MSG, pos, end);
        return true;
    }

    /** A printable field of 1..limit octets followed by SP, kept as field {@code index} ("-" is nil). */
    private int token(int pos, int limit, int index) {
        int stop = pos;
        while (stop < end && buf[stop] != ' ') {
            if (!printable(buf[stop]) || stop - pos >= limit) {
                return FAIL;
            }
            stop++;
        }
        if (stop == pos || stop >= end) {
            return FAIL;
        }
        if (stop - pos != 1 || buf[pos] != '-') {
            keep(index, pos, stop);
        }
        return stop + 1;
    }

    /** "-", or one or more SD-ELEMENTs; the position after them. */
    private int structuredData(int pos) {
        if (pos < end && buf[pos] == '-') {
            return pos + 1;
        }
        while (pos < end && buf[pos] == '[') {
            pos = sdElement(pos + 1);
            if (pos == FAIL) {
                return FAIL;
            }
            sdElements++;
        }
        return sdElements > 0 ? pos : FAIL;
    }

    /** One element whose '[' is taken: SD-ID (SP PARAM-NAME="VALUE")* ']'. */
    private int sdElement(int pos) {
        pos = sdName(pos);
        while (pos != FAIL && pos < end && buf[pos] == ' ') {
            pos = sdName(pos + 1);
            if (pos == FAIL || end - pos < 2 || buf[pos] != '=' || buf[pos + 1] != '"') {
                return FAIL;
            }
            pos = sdValue(pos + 2);
        }
        if (pos == FAIL || pos >= end || buf[pos] != ']') {
            return FAIL;
        }
        return pos + 1;
    }

    /** 1-32 printable octets but '=', ']' and '"' (SP is not printable). */
    private int sdName(int pos) {
        int n = 0;
        while (pos + n < end && n < SD_NAME_MAX && printable(buf[pos + n]) && buf[pos + n] != '='
                && buf[pos + n] != ']' && buf[pos + n] != '"') {
            n++;
        }
        return n > 0 ? pos + n : FAIL;
    }

    /** A PARAM-VALUE whose opening quote is taken, up to and past its closing one. */
    private int sdValue(int pos) {
        for (int i = pos; i < end; i++) {
            byte b = buf[i];
            if (b == '\\') {
                if (i + 1 >= end || (buf[i + 1] != '"' && buf[i + 1] != '\\' && buf[i + 1] != ']')) {
                    return FAIL;
                }
                i++;
            } else if (b == '"') {
                return i + 1;
            } else if (b == ']') {
                return FAIL;
            }
        }
        return FAIL;
    }

    /** full-date "T" full-time: DDDD-DD-DDTDD:DD:DD, a fraction of 1-6 digits, Z or ±hh:mm. */
    private boolean validTimestamp5424(int start, int stop) {
        if (stop - start < SHAPE_5424.length() + 1) {
            return false;
        }
        for (int i = 0; i < SHAPE_5424.length(); i++) {
            char shape = SHAPE_5424.charAt(i);
            byte b = buf[start + i];
            if (shape == 'D' ? !isDigit(b) : b != shape) {
                return false;
            }
        }
        int pos = start + SHAPE_5424.length();
        if (buf[pos] == '.') {
            int n = 1;
            while (pos + n < stop && isDigit(buf[pos + n])) {
                n++;
            }
            if (n == 1 || n > 7) {
                return false;
            }
            pos += n;
        }
        if (stop - pos == 1) {
            return buf[pos] == 'Z';
        }
        return stop - pos == 6 && (buf[pos] == '+' || buf[pos] == '-') && isDigit(buf[pos + 1])
                && isDigit(buf[pos + 2]) && buf[pos + 3] == ':' && isDigit(buf[pos + 4]) && isDigit(buf[pos + 5]);
    }

    /** Mmm dd hh:mm:ss SP HOSTNAME SP, then TAG when there is one, then MSG. */
    private boolean parse3164(int pos) {
        if (!timestamp3164(pos)) {
            return false;
        }
        rfc3164 = true;
        keep(TIMESTAMP, pos, pos + TIMESTAMP_3164_LENGTH);
        pos = token(pos + TIMESTAMP_3164_LENGTH + 1, HEADER_LIMITS[HOST], HOST);
        if (pos == FAIL) {
            return false;
        }
        int afterTag = tag(pos);
        if (afterTag != FAIL) {
            pos = afterTag < end && buf[afterTag] == ' ' ? afterTag + 1 : afterTag;
        }
        keep(MSG, pos, end);
        return true;
    }

    /** "Mmm dd hh:mm:ss " with an English month and the day padded with a space. */
    private boolean timestamp3164(int pos) {
        if (end - pos < TIMESTAMP_3164_LENGTH + 1) {
            return false;
        }
        byte dayTens = buf[pos + 4];
        return month(pos) && buf[pos + 3] == ' '
                && (dayTens == ' ' || (dayTens >= '1' && dayTens <= '3')) && isDigit(buf[pos + 5])
                && buf[pos + 6] == ' ' && isDigit(buf[pos + 7]) && isDigit(buf[pos + 8]) && buf[pos + 9] == ':'
                && isDigit(buf[pos + 10]) && isDigit(buf[pos + 11]) && buf[pos + 12] == ':'
                && isDigit(buf[pos + 13]) && isDigit(buf[pos + 14]) && buf[pos + 15] == ' ';
    }

    private boolean month(int pos) {
        for (int m = 0; m < MONTHS.length(); m += 3) {
            if (buf[pos] == MONTHS.charAt(m) && buf[pos + 1] == MONTHS.charAt(m + 1)
                    && buf[pos + 2] == MONTHS.charAt(m + 2)) {
                return true;
            }
        }
        return false;
    }

    /** TAG: 1-32 of [A-Za-z0-9_./-], an optional [PROCID], then ':'; the position after the ':'. */
    private int tag(int pos) {
        int stop = pos;
        while (stop < end && stop - pos < TAG_MAX + 1 && tagChar(buf[stop])) {
            stop++;
        }
        if (stop == pos || stop - pos > TAG_MAX || stop >= end) {
            return FAIL;
        }
        int appEnd = stop;
        int pidStart = -1;
        if (buf[stop] == '[') {
            pidStart = stop + 1;
            stop = pidStart;
            while (stop < end && stop - pidStart <= TAG_PID_MAX && printable(buf[stop]) && buf[stop] != '['
                    && buf[stop] != '\\' && buf[stop] != ']') {
                stop++;
            }
            if (stop == pidStart || stop - pidStart > TAG_PID_MAX || stop >= end || buf[stop] != ']') {
                return FAIL;
            }
            stop++;
        }
        if (stop >= end || buf[stop] != ':') {
            return FAIL;
        }
        keep(APP, pos, appEnd);
        if (pidStart >= 0) {
            keep(PROCID, pidStart, stop - 1);
        }
        return stop + 1;
    }

    /**
     * Well-formed UTF-8 (Unicode table 3-7): no overlong forms, no surrogates, nothing past
     * U+10FFFF. By hand: a decoder would allocate per message.
     */
    static boolean validUtf8(byte[] bytes, int from, int to) {
        int i = from;
        while (i < to) {
            int b = bytes[i] & 0xff;
            if (b < 0x80) {
                i++;
                continue;
            }
            int more;
            int low = 0x80;
            int high = 0xbf;
            if (b >= 0xc2 && b <= 0xdf) {
                more = 1;
            } else if (b >= 0xe0 && b <= 0xef) {
                more = 2;
                low = b == 0xe0 ? 0xa0 : 0x80;
                high = b == 0xed ? 0x9f : 0xbf;
            } else if (b >= 0xf0 && b <= 0xf4) {
                more = 3;
                low = b == 0xf0 ? 0x90 : 0x80;
                high = b == 0xf4 ? 0x8f : 0xbf;
            } else {
                return false;
            }
            if (to - i <= more) {
                return false;
            }
            int second = bytes[i + 1] & 0xff;
            if (second < low || second > high) {
                return false;
            }
            for (int k = 2; k <= more; k++) {
                if ((bytes[i + k] & 0xc0) != 0x80) {
                    return false;
                }
            }
            i += more + 1;
        }
        return true;
    }

    private static boolean tagChar(byte b) {
        return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || isDigit(b) || b == '_' || b == '.'
                || b == '/' || b == '-';
    }

    private static boolean printable(byte b) {
        return b >= 0x21 && b <= 0x7e;
    }

    private static boolean isDigit(byte b) {
        return b >= '0' && b <= '9';
    }
}
