package serverlab.core;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Counts syslog messages on one TCP connection (spec §7, RFC 6587): a frame starting with a
 * digit 1-9 is octet-counted, anything else ends at a newline. A message may arrive split
 * across any number of reads. In count mode messages are counted, never kept; in parse mode
 * (spec §7.1) each one is gathered and parsed when it is complete.
 */
public final class SyslogFramer {
    /** Nine digits is under 1 GB; a longer "length" is a newline-framed message that starts with digits. */
    private static final int MAX_LENGTH_DIGITS = 9;

    private enum State { FRAME_START, LENGTH, OCTETS, LINE, LOST }

    /** A parse-mode connection's buffer starts at this size; one grown past it is let go after its message. */
    private static final int KEPT_SIZE = 8 * 1024;

    private final Stats stats;
    /** RFC 5425's framing lost: null on §7's TCP, which reads a bad length as a newline-framed message. */
    private final Runnable onLost;
    /** Null in count mode: nothing is kept. */
    private final SyslogParsing.Tally tally;
    private byte[] kept;
    private int keptLength;
    private State state = State.FRAME_START;
    private int digits;
    private int messageLength;
    private int pending;

    public SyslogFramer(Stats stats) {
        this(stats, null);
    }

    /** {@code parsing}: the server's mode; in parse mode each message is parsed too. */
    public SyslogFramer(Stats stats, SyslogParsing parsing) {
        this(stats, parsing, null);
    }

    private SyslogFramer(Stats stats, SyslogParsing parsing, Runnable onLost) {
        this.stats = stats;
        this.onLost = onLost;
        this.tally = parsing != null && parsing.parses() ? parsing.tally() : null;
        this.kept = tally == null ? null : new byte[KEPT_SIZE];
    }

    /**
     * RFC 5425 (spec §15): octet-counted frames only. A bad MSG-LEN (0, a leading zero, more
     * than nine digits, no digit) leaves no way to find the next frame: the frames before it
     * are counted, it is not, {@code onLost} runs once, and nothing more is read.
     */
    public static SyslogFramer octetCounting(Stats stats, SyslogParsing parsing, Runnable onLost) {
        return new SyslogFramer(stats, parsing, onLost);
    }

    /** Takes every byte of {@code buf}; the counts are published before it returns. */
    public void feed(ByteBuffer buf) {
        while (buf.hasRemaining()) {
            switch (state) {
                case FRAME_START:
                    startFrame(buf.get(buf.position()));
                    break;
                case LENGTH:
                    readLength(buf.get());
                    break;
                case OCTETS:
                    skipOctets(buf);
                    break;
                case LOST:
                    buf.position(buf.limit());
                    break;
                default:
                    scanLine(buf);
                    break;
            }
        }
        if (tally != null) {
            tally.publish();
        }
    }

    private void startFrame(byte first) {
        digits = 0;
        messageLength = 0;
        keptLength = 0;
        if (first >= '1' && first <= '9') {
            state = State.LENGTH;
        } else if (onLost != null) {
            lose();
        } else {
            state = State.LINE;
        }
    }

    private void lose() {
        state = State.LOST;
        onLost.run();
    }

    private void readLength(byte b) {
        if (b == ' ') {
            pending = messageLength;
            keptLength = 0;
            state = State.OCTETS;
            return;
        }
        if (b != '\n') {
            // Kept in case these digits turn out to open a newline-framed message.
            keep(b);
        }
        if (b >= '0' && b <= '9' && digits < MAX_LENGTH_DIGITS) {
            messageLength = messageLength * 10 + (b - '0');
            digits++;
        } else if (onLost != null) {
            lose();
        } else {
            // Not octet counting after all: the digits read so far open a newline-framed message.
            messageLength = digits;
            state = State.LINE;
            if (b == '\n') {
                endLine();
            } else {
                messageLength++;
            }
        }
    }

    private void skipOctets(ByteBuffer buf) {
        int n = Math.min(pending, buf.remaining());
        keep(buf, buf.position(), n);
        buf.position(buf.position() + n);
        pending -= n;
        if (pending == 0) {
            complete();
            state = State.FRAME_START;
        }
    }

    private void scanLine(ByteBuffer buf) {
        int start = buf.position();
        int limit = buf.limit();
        for (int i = start; i < limit; i++) {
            if (buf.get(i) == '\n') {
                keep(buf, start, i - start);
                messageLength += i - start;
                buf.position(i + 1);
                endLine();
                return;
            }
        }
        keep(buf, start, limit - start);
        messageLength += limit - start;
        buf.position(limit);
    }

    private void endLine() {
        if (messageLength > 0) {
            complete();
        }
        state = State.FRAME_START;
    }

    /** A whole message: counted, and in parse mode parsed. */
    private void complete() {
        if (tally != null) {
            tally.parse(kept, 0, keptLength);
            if (kept.length > KEPT_SIZE) {
                kept = new byte[KEPT_SIZE];
            }
        }
        stats.syslogMessage(messageLength);
    }

    private void keep(byte b) {
        if (tally != null) {
            room(1);
            kept[keptLength++] = b;
        }
    }

    private void keep(ByteBuffer buf, int from, int n) {
        if (tally != null && n > 0) {
            room(n);
            buf.get(from, kept, keptLength, n);
            keptLength += n;
        }
    }

    /** Grows the buffer to take {@code n} more bytes: a message is kept whole, as long as it is. */
    private void room(int n) {
        if (keptLength + n > kept.length) {
            kept = Arrays.copyOf(kept, Math.max(keptLength + n, kept.length * 2));
        }
    }

    /** One UDP datagram is one message; a trailing newline is not part of it. */
    public static void countDatagram(Stats stats, ByteBuffer datagram) {
        countDatagram(stats, datagram, null);
    }

    /** As {@link #countDatagram(Stats, ByteBuffer)}, and parsed by {@code tally} unless it is null. */
    public static void countDatagram(Stats stats, ByteBuffer datagram, SyslogParsing.Tally tally) {
        int length = datagram.remaining();
        if (length > 0 && datagram.get(datagram.limit() - 1) == '\n') {
            length--;
        }
        if (length > 0) {
            if (tally != null) {
                tally.parse(datagram, datagram.position(), length);
                tally.publish();
            }
            stats.syslogMessage(length);
        }
    }
}
